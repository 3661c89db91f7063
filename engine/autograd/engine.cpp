#include "engine/autograd/engine.h"

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <queue>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/device.h"
#include "engine/ops/elementwise.h"
#include "engine/profiler.h"
#include "engine/threads.h"

namespace tandem::autograd {
namespace {

thread_local bool inside_engine_worker = false;
struct GraphTask;
thread_local GraphTask* current_graph_task = nullptr;  ///< the task whose node this thread runs

struct ReadyNode;
struct NewestFirst {
  bool operator()(const ReadyNode& a, const ReadyNode& b) const;
};

/// State of one backward() call, shared by the threads that run its nodes.
struct GraphTask {
  bool retain_graph = false;
  int threads_per_cpu_worker = 1;
  /// Note [Backward on the calling thread]: the nodes of this device run on the thread that
  /// called backward(); nullopt: the caller only waits.
  std::optional<Device> caller_device;

  std::mutex mutex;                             // guards everything below
  std::condition_variable state_changed;        ///< a node finished, or the caller has work
  std::unordered_map<Node*, int> dependencies;  ///< edges into each node not yet delivered
  std::unordered_map<Node*, std::vector<Tensor>> input_buffers;  ///< grads gathered so far
  int outstanding = 0;                                           ///< nodes queued or running
  std::priority_queue<ReadyNode, std::vector<ReadyNode>, NewestFirst> caller_queue;
  std::exception_ptr error;                            ///< first failure
  std::vector<std::function<void()>> final_callbacks;  ///< queue_callback(), in order
};

struct ReadyNode {
  std::shared_ptr<GraphTask> task;
  std::shared_ptr<Node> node;
  std::vector<Tensor> grads;
};

bool NewestFirst::operator()(const ReadyNode& a, const ReadyNode& b) const {
  return a.node->priority() < b.node->priority();
}

class DeviceWorker;
DeviceWorker& worker_for(Device device);
void schedule(ReadyNode ready);

// A node's name in a profile: an op's node "conv2d" as Conv2dBackward (PyTorch's
// ConvolutionBackward0), a node class named in CamelCase (AccumulateGrad) as it is.
std::string backward_event_name(const std::string& node) {
  if (node.empty() || node[0] < 'a' || node[0] > 'z') return node;
  std::string name;
  bool word_start = true;
  for (char c : node) {
    if (c == '_') {
      word_start = true;
      continue;
    }
    name += word_start && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    word_start = false;
  }
  return name + "Backward";
}

bool has_failed(GraphTask& task) {
  std::lock_guard lock(task.mutex);
  return task.error != nullptr;
}

// Adds grad into the target's buffer; schedules the target once all its inputs arrived.
void deliver(const std::shared_ptr<GraphTask>& task, const Edge& edge, Tensor grad) {
  Node* target = edge.node.get();
  std::unique_lock lock(task->mutex);
  auto& buffer = task->input_buffers[target];
  if (buffer.empty()) buffer.resize(target->num_outputs());
  Tensor& slot = buffer.at(edge.input_nr);
  if (grad.defined()) slot = slot.defined() ? add(slot, grad) : std::move(grad);
  if (--task->dependencies[target] > 0) return;
  ReadyNode next{task, edge.node, std::move(buffer)};
  task->input_buffers.erase(target);
  ++task->outstanding;
  lock.unlock();
  schedule(std::move(next));
}

// Applies the node and delivers its gradients to the nodes it depends on.
void evaluate(ReadyNode& ready, Device device) {
  GraphTask& task = *ready.task;
  Node& node = *ready.node;
  std::vector<Tensor> input_grads;
  bool any_defined = false;
  for (const Tensor& grad : ready.grads) any_defined = any_defined || grad.defined();
  if (any_defined) {
    ThreadCountGuard threads(device.is_cpu() ? task.threads_per_cpu_worker : 1);
    const profiler::RecordScope scope([&] { return backward_event_name(node.name()); },
                                      profiler::Category::Backward);
    current_graph_task = &task;
    try {
      input_grads = node.apply(ready.grads);
    } catch (...) {
      current_graph_task = nullptr;
      throw;
    }
    current_graph_task = nullptr;
    if (!task.retain_graph) node.release_saved();
  }
  ready.grads.clear();
  const auto& edges = node.next_edges();
  TANDEM_CHECK(input_grads.empty() || input_grads.size() == edges.size(), "[autograd] ",
               node.name(), " returned ", input_grads.size(), " gradients for ", edges.size(),
               " inputs");
  for (size_t i = 0; i < edges.size(); ++i) {
    if (!edges[i].valid()) continue;
    deliver(ready.task, edges[i], input_grads.empty() ? Tensor() : std::move(input_grads[i]));
  }
}

// Runs one ready node on this thread (a worker, or the caller for its own device): a failure is
// kept as the task's first error, and later nodes of a failed task are skipped.
void execute(ReadyNode& ready, Device device) {
  GraphTask& task = *ready.task;
  if (!has_failed(task)) {
    try {
      evaluate(ready, device);
    } catch (...) {
      std::lock_guard lock(task.mutex);
      if (!task.error) task.error = std::current_exception();
    }
  }
  std::lock_guard lock(task.mutex);
  if (--task.outstanding == 0) task.state_changed.notify_all();
}

/// One thread that runs the ready nodes of one device.
class DeviceWorker {
 public:
  explicit DeviceWorker(Device device) : device_(device), thread_([this] { loop(); }) {}
  ~DeviceWorker() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }

  void push(ReadyNode ready) {
    {
      std::lock_guard lock(mutex_);
      queue_.push(std::move(ready));
    }
    wake_.notify_one();
  }

 private:
  void loop() {
    bind_thread_to(device_);  // Note [Device contexts] (engine/cuda/runtime/device.h)
    profiler::set_thread_name("autograd " + device_.str());
    inside_engine_worker = true;
    set_grad_mode_enabled(false);  // backward itself is never recorded
    while (true) {
      ReadyNode ready;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping
        ready = queue_.top();
        queue_.pop();
      }
      execute(ready, device_);
    }
  }

  Device device_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::priority_queue<ReadyNode, std::vector<ReadyNode>, NewestFirst> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members it uses exist
};

DeviceWorker& worker_for(Device device) {
  static std::mutex mutex;
  static std::unordered_map<Device, std::unique_ptr<DeviceWorker>> workers;
  std::lock_guard lock(mutex);
  auto& worker = workers[device];
  if (!worker) worker = std::make_unique<DeviceWorker>(device);
  return *worker;
}

void schedule(ReadyNode ready) {
  const Device device = ready.node->device();
  GraphTask& task = *ready.task;
  if (task.caller_device == device) {
    {
      std::lock_guard lock(task.mutex);
      task.caller_queue.push(std::move(ready));
    }
    task.state_changed.notify_all();
    return;
  }
  worker_for(device).push(std::move(ready));
}

// The calling thread's part of a backward pass: runs the nodes of its device as they become
// ready until no node of the task is queued or running anywhere.
void run_caller_nodes(GraphTask& task) {
  struct BackwardThreadState {  // what a worker thread has, restored on the way out
    bool grad_mode = grad_mode_enabled();
    BackwardThreadState() {
      inside_engine_worker = true;
      set_grad_mode_enabled(false);
    }
    ~BackwardThreadState() {
      inside_engine_worker = false;
      set_grad_mode_enabled(grad_mode);
    }
  } state;
  while (true) {
    ReadyNode ready;
    {
      std::unique_lock lock(task.mutex);
      task.state_changed.wait(lock,
                              [&] { return task.outstanding == 0 || !task.caller_queue.empty(); });
      if (task.caller_queue.empty()) return;
      ready = task.caller_queue.top();
      task.caller_queue.pop();
    }
    execute(ready, *task.caller_device);
  }
}

// Counts, for every node reachable from the roots, how many edges lead into it.
void count_dependencies(const std::vector<Edge>& root_edges, GraphTask& task,
                        std::unordered_set<Device>& cpu_devices) {
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  for (const Edge& edge : root_edges) {
    if (seen.insert(edge.node.get()).second) stack.push_back(edge.node.get());
  }
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (node->device().is_cpu()) cpu_devices.insert(node->device());
    for (const Edge& next : node->next_edges()) {
      if (!next.valid()) continue;
      ++task.dependencies[next.node.get()];
      if (seen.insert(next.node.get()).second) stack.push_back(next.node.get());
    }
  }
}

}  // namespace

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                  bool retain_graph) {
  TANDEM_CHECK(!inside_engine_worker,
               "[backward] called from inside a backward pass (a hook or node); this is not "
               "supported");
  TANDEM_CHECK(roots.size() == grad_roots.size(), "[backward] ", roots.size(), " roots but ",
               grad_roots.size(), " gradients");
  auto task = std::make_shared<GraphTask>();
  task->retain_graph = retain_graph;

  std::vector<Edge> root_edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    TANDEM_CHECK(roots[i].requires_grad(),
                 "[backward] tensor does not require grad and has no grad_fn");
    TANDEM_CHECK(grad_roots[i].shape() == roots[i].shape(), "[backward] gradient shape ",
                 shape_str(grad_roots[i].shape()), " does not match tensor shape ",
                 shape_str(roots[i].shape()));
    root_edges.push_back(gradient_edge(roots[i]));
  }
  std::unordered_set<Device> cpu_devices;
  count_dependencies(root_edges, *task, cpu_devices);
  task->threads_per_cpu_worker =
      std::max(1, num_threads() / std::max<int>(1, static_cast<int>(cpu_devices.size())));
  // Note [Backward on the calling thread]
  if (roots[0].device().is_cpu()) task->caller_device = roots[0].device();

  // Seed the roots' buffers, then start every root that waits for nothing else.
  std::vector<ReadyNode> initial;
  {
    std::lock_guard lock(task->mutex);
    for (size_t i = 0; i < roots.size(); ++i) {
      auto& buffer = task->input_buffers[root_edges[i].node.get()];
      if (buffer.empty()) buffer.resize(root_edges[i].node->num_outputs());
      Tensor& slot = buffer.at(root_edges[i].input_nr);
      Tensor seed = grad_roots[i].detach();
      slot = slot.defined() ? add(slot, seed) : seed;
    }
    std::unordered_set<Node*> started;
    for (const Edge& edge : root_edges) {
      Node* node = edge.node.get();
      if (task->dependencies[node] > 0 || !started.insert(node).second) continue;
      initial.push_back({task, edge.node, std::move(task->input_buffers[node])});
      task->input_buffers.erase(node);
    }
    task->outstanding = static_cast<int>(initial.size());
  }
  for (ReadyNode& ready : initial) schedule(std::move(ready));
  run_caller_nodes(*task);
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard lock(task->mutex);
    if (task->error) std::rethrow_exception(task->error);
    callbacks = std::move(task->final_callbacks);
  }
  for (auto& callback : callbacks) callback();
}

void queue_callback(std::function<void()> callback) {
  GraphTask* task = current_graph_task;
  TANDEM_CHECK(task != nullptr,
               "[autograd] queue_callback() can only be called from inside a backward pass");
  std::lock_guard lock(task->mutex);
  task->final_callbacks.push_back(std::move(callback));
}

}  // namespace tandem::autograd
