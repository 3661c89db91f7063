#include "engine/autograd/engine.h"

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/ops/elementwise.h"
#include "engine/threads.h"

namespace tandem::autograd {
namespace {

thread_local bool inside_engine_worker = false;
struct GraphTask;
thread_local GraphTask* current_graph_task = nullptr;  ///< the task whose node this thread runs

/// State of one backward() call, shared by the workers that run its nodes.
struct GraphTask {
  bool retain_graph = false;
  int threads_per_cpu_worker = 1;

  std::mutex mutex;  // guards everything below
  std::condition_variable finished;
  std::unordered_map<Node*, int> dependencies;  ///< edges into each node not yet delivered
  std::unordered_map<Node*, std::vector<Tensor>> input_buffers;  ///< grads gathered so far
  int outstanding = 0;                                           ///< nodes queued or running
  std::exception_ptr error;                                      ///< first failure
  std::vector<std::function<void()>> final_callbacks;            ///< queue_callback(), in order
};

struct ReadyNode {
  std::shared_ptr<GraphTask> task;
  std::shared_ptr<Node> node;
  std::vector<Tensor> grads;
};

struct NewestFirst {
  bool operator()(const ReadyNode& a, const ReadyNode& b) const {
    return a.node->priority() < b.node->priority();
  }
};

class DeviceWorker;
DeviceWorker& worker_for(Device device);

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
      run(ready);
    }
  }

  void run(ReadyNode& ready) {
    GraphTask& task = *ready.task;
    if (!has_failed(task)) {
      try {
        evaluate(ready);
      } catch (...) {
        std::lock_guard lock(task.mutex);
        if (!task.error) task.error = std::current_exception();
      }
    }
    std::lock_guard lock(task.mutex);
    if (--task.outstanding == 0) task.finished.notify_all();
  }

  static bool has_failed(GraphTask& task) {
    std::lock_guard lock(task.mutex);
    return task.error != nullptr;
  }

  void evaluate(ReadyNode& ready) {
    GraphTask& task = *ready.task;
    Node& node = *ready.node;
    std::vector<Tensor> input_grads;
    bool any_defined = false;
    for (const Tensor& grad : ready.grads) any_defined = any_defined || grad.defined();
    if (any_defined) {
      ThreadCountGuard threads(device_.is_cpu() ? task.threads_per_cpu_worker : 1);
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

  // Adds grad into the target's buffer; queues the target once all its inputs arrived.
  static void deliver(const std::shared_ptr<GraphTask>& task, const Edge& edge, Tensor grad) {
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
    worker_for(target->device()).push(std::move(next));
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
  for (ReadyNode& ready : initial) {
    const Device device = ready.node->device();
    worker_for(device).push(std::move(ready));
  }
  std::vector<std::function<void()>> callbacks;
  {
    std::unique_lock lock(task->mutex);
    task->finished.wait(lock, [&] { return task->outstanding == 0; });
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
