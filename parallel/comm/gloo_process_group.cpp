#include "parallel/comm/gloo_process_group.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <type_traits>

#include "engine/error.h"
#include "engine/profiler.h"
#include "parallel/comm/socket.h"

namespace tandem::parallel {
namespace {

// Gloo's view of our store: it only needs set/get/wait, for the addresses of its TCP pairs.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<parallel::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const Bytes value = store_->get(key);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  std::shared_ptr<parallel::Store> store_;
};

// Note [SIGPIPE]: Gloo writes to its sockets with writev(), which raises SIGPIPE when the peer
// has died, and SIGPIPE's default action kills the process. A dead peer must become an error in
// Work::wait() instead, so the signal is ignored unless the program installed its own handler.
void ignore_sigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    std::signal(SIGPIPE, SIG_IGN);
  }
}

std::shared_ptr<gloo::transport::Device> create_device(const ProcessGroupOptions& options) {
  gloo::transport::tcp::attr attr;
  if (!options.interface.empty()) {
    // Gloo's own error for a missing interface is an internal assertion; name the ones there are.
    const std::vector<std::string> names = net::interface_names();
    if (std::find(names.begin(), names.end(), options.interface) == names.end()) {
      std::string available;
      for (const auto& name : names) available += (available.empty() ? "" : ", ") + name;
      TANDEM_FAIL("[gloo] no network interface '", options.interface,
                  "' with an IP address on this machine (GLOO_SOCKET_IFNAME or the options); it "
                  "has: ",
                  available.empty() ? "none" : available);
    }
    attr.iface = options.interface;
  } else {
    attr.hostname = options.hostname.empty() ? "127.0.0.1" : options.hostname;
  }
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    TANDEM_FAIL("[gloo] cannot use ",
                options.interface.empty() ? "hostname '" + attr.hostname + "'"
                                          : "network interface '" + options.interface + "'",
                " for the TCP transport: ", message_of(e));
  }
}

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>;

// Note [Half all-reduce]: Gloo has no bfloat16 type, and its float16 sum is its own. A 16-bit
// sum widens both operands to float, adds, and rounds back: one rounding per add, as NCCL's
// native bfloat16/float16 sums do. out may alias a or b (every element is read before written).
template <typename Half>
void half_sum(void* out, const void* a, const void* b, size_t n) {
  auto* result = static_cast<Half*>(out);
  const auto* x = static_cast<const Half*>(a);
  const auto* y = static_cast<const Half*>(b);
  for (size_t i = 0; i < n; ++i) {
    result[i] = Half(static_cast<float>(x[i]) + static_cast<float>(y[i]));
  }
}

// Gloo's element-wise sum for one dtype.
template <typename T>
gloo::AllreduceOptions::Func sum_function() {
  if constexpr (kIsHalf<T>) {
    return &half_sum<T>;
  } else {
    return [](void* out, const void* a, const void* b, size_t n) { gloo::sum<T>(out, a, b, n); };
  }
}

template <typename T>
void allreduce_one(const std::shared_ptr<gloo::Context>& context, const Tensor& tensor,
                   uint32_t tag, std::chrono::milliseconds timeout) {
  gloo::AllreduceOptions options(context);
  options.setOutput(tensor.data<T>(), static_cast<size_t>(tensor.numel()));
  options.setReduceFunction(sum_function<T>());
  options.setTag(tag);
  options.setTimeout(timeout);
  gloo::allreduce(options);
}

template <typename T>
void broadcast_one(const std::shared_ptr<gloo::Context>& context, const Tensor& tensor, int root,
                   uint32_t tag, std::chrono::milliseconds timeout) {
  gloo::BroadcastOptions options(context);
  options.setOutput(tensor.data<T>(), static_cast<size_t>(tensor.numel()));
  options.setRoot(root);
  options.setTag(tag);
  options.setTimeout(timeout);
  gloo::broadcast(options);
}

// Gloo gathers into one buffer (rank r's part at offset r); the outputs are separate tensors.
template <typename T>
void allgather_into(const std::shared_ptr<gloo::Context>& context, std::vector<Tensor>& outputs,
                    const Tensor& input, uint32_t tag, std::chrono::milliseconds timeout) {
  const size_t n = static_cast<size_t>(input.numel());
  std::vector<T> gathered(n * outputs.size());
  gloo::AllgatherOptions options(context);
  options.setInput(input.data<T>(), n);
  options.setOutput(gathered.data(), gathered.size());
  options.setTag(tag);
  options.setTimeout(timeout);
  gloo::allgather(options);
  for (size_t r = 0; r < outputs.size(); ++r) {
    std::memcpy(outputs[r].data<T>(), gathered.data() + r * n, n * sizeof(T));
  }
}

// Avg's last step: × factor in float (a 16-bit type then rounds once, back to itself).
template <typename T>
void scale(const Tensor& tensor, float factor) {
  T* data = tensor.data<T>();
  for (int64_t i = 0; i < tensor.numel(); ++i) data[i] = T(static_cast<float>(data[i]) * factor);
}

// Calls body(T{}) with the element type T of `dtype`, one of those check_tensors() lets through.
template <typename Body>
void with_element_type(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::Float32: return body(float{});
    case DType::Int64: return body(int64_t{});
    case DType::BFloat16: return body(BFloat16{});
    case DType::Float16: return body(Float16{});
    case DType::UInt8: break;
  }
  TANDEM_FAIL("[gloo] no collective for ", dtype_name(dtype), " tensors");
}

}  // namespace

GlooProcessGroup::GlooProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                                   ProcessGroupOptions options)
    : ProcessGroup(rank, size, std::move(options)) {
  TANDEM_CHECK(store != nullptr, "[gloo] GlooProcessGroup needs a store");
  ignore_sigpipe();
  // Each rank counts the groups it created on this store; as every rank creates them in the same
  // order, the k-th group of every rank meets under the same prefix, apart from earlier groups.
  const int64_t generation = store->add("gloo/groups_of_rank" + std::to_string(rank), 1);
  store_ =
      std::make_shared<PrefixStore>("gloo/" + std::to_string(generation) + "/", std::move(store));
  auto device = create_device(this->options());
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(this->options().timeout);
  try {
    GlooStore gloo_store(store_);
    context->connectFullMesh(gloo_store, device);
    // Note [Rendezvous barrier]: a rank is through connectFullMesh() once its own pairs are
    // connected, while another rank may still be reading addresses from the store. If rank 0
    // hosts the store and returned (or exited) now, that read would fail; so every rank leaves
    // only once all have connected.
    if (store_->add("connected", 1) == size) store_->set("all_connected", {});
    store_->wait({"all_connected"});
  } catch (const std::exception& e) {
    TANDEM_FAIL("[gloo] rendezvous failed on rank ", rank, " of ", size, ": ", message_of(e));
  }
  context_ = std::move(context);
  worker_ = std::thread([this] { worker_loop(); });
}

GlooProcessGroup::~GlooProcessGroup() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void GlooProcessGroup::check_tensors(const std::string& op, const std::vector<Tensor>& tensors,
                                     bool allow_int64) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TANDEM_CHECK(t.defined(), "[gloo] ", op, ": tensor ", i, " is undefined");
    TANDEM_CHECK(t.device().is_cpu(), "[gloo] ", op, ": tensor ", i, " is on ", t.device().str(),
                 "; the Gloo process group takes CPU tensors for now (staging CUDA tensors "
                 "through pinned memory is not written yet)");
    TANDEM_CHECK(t.is_dense(), "[gloo] ", op, ": tensor ", i,
                 " is not dense (collectives work in place on contiguous or channels-last "
                 "tensors)");
    check_collective_dtype("gloo", op, i, t.dtype(), allow_int64);
  }
}

std::shared_ptr<Work> GlooProcessGroup::allreduce(std::vector<Tensor> tensors, ReduceOp op) {
  check_tensors("allreduce", tensors, /*allow_int64=*/op == ReduceOp::Sum);
  return enqueue("allreduce", [this, tensors = std::move(tensors), op](uint32_t tag) {
    for (const Tensor& t : tensors) {
      if (t.numel() == 0) continue;
      with_element_type(t.dtype(), [&](auto element) {
        using T = decltype(element);
        allreduce_one<T>(context_, t, tag++, options().timeout);
        // check_tensors() refused int64 for Avg.
        if constexpr (!std::is_same_v<T, int64_t>) {
          if (op == ReduceOp::Avg) scale<T>(t, 1.0f / static_cast<float>(size()));
        }
      });
    }
    return static_cast<uint32_t>(tensors.size());
  });
}

std::shared_ptr<Work> GlooProcessGroup::broadcast(std::vector<Tensor> tensors, int root) {
  TANDEM_CHECK(root >= 0 && root < size(), "[gloo] broadcast: root ", root, " is out of range for ",
               size(), " ranks");
  check_tensors("broadcast", tensors, /*allow_int64=*/true);
  return enqueue("broadcast", [this, tensors = std::move(tensors), root](uint32_t tag) {
    for (const Tensor& t : tensors) {
      if (t.numel() == 0) continue;
      with_element_type(t.dtype(), [&](auto element) {
        broadcast_one<decltype(element)>(context_, t, root, tag++, options().timeout);
      });
    }
    return static_cast<uint32_t>(tensors.size());
  });
}

std::shared_ptr<Work> GlooProcessGroup::allgather(std::vector<Tensor>& outputs,
                                                  const Tensor& input) {
  check_tensors("allgather", {input}, /*allow_int64=*/true);
  check_tensors("allgather", outputs, /*allow_int64=*/true);
  TANDEM_CHECK(static_cast<int>(outputs.size()) == size(), "[gloo] allgather: got ", outputs.size(),
               " output tensors for ", size(), " ranks");
  for (size_t r = 0; r < outputs.size(); ++r) {
    TANDEM_CHECK(outputs[r].shape() == input.shape() && outputs[r].dtype() == input.dtype(),
                 "[gloo] allgather: output ", r, " differs from the input in shape or dtype");
  }
  return enqueue("allgather", [this, outputs, input](uint32_t tag) mutable {
    if (input.numel() == 0) return 0u;
    with_element_type(input.dtype(), [&](auto element) {
      allgather_into<decltype(element)>(context_, outputs, input, tag, options().timeout);
    });
    return 1u;
  });
}

std::shared_ptr<Work> GlooProcessGroup::barrier() {
  return enqueue("barrier", [this](uint32_t tag) {
    gloo::BarrierOptions options(context_);
    options.setTag(tag);
    options.setTimeout(this->options().timeout);
    gloo::barrier(options);
    return 1u;
  });
}

std::shared_ptr<Work> GlooProcessGroup::enqueue(const std::string& op,
                                                std::function<uint32_t(uint32_t)> run) {
  std::shared_ptr<Work> work;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    work =
        std::make_shared<Work>("[gloo] " + op + " #" + std::to_string(++submitted_) + " on rank " +
                                   std::to_string(rank()) + " of " + std::to_string(size()),
                               options().timeout);
    queue_.push_back(Task{work, op, std::move(run)});
  }
  queued_.notify_one();
  return work;
}

void GlooProcessGroup::worker_loop() {
  profiler::set_thread_name("gloo");
  while (true) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    run_task(task);
  }
}

void GlooProcessGroup::run_task(Task& task) {
  const profiler::RecordScope scope([&] { return "gloo " + task.op; },
                                    profiler::Category::Communication);
  task.work->mark_started();
  if (!broken_.empty()) {
    task.work->mark_completed(std::make_exception_ptr(Error(
        "[gloo] " + task.op + " not run on rank " + std::to_string(rank()) + " of " +
        std::to_string(size()) + ": the group is broken by an earlier failure (" + broken_ + ")")));
    return;
  }
  try {
    next_tag_ += task.run(next_tag_);
    task.work->mark_completed();
  } catch (const std::exception& e) {
    broken_ = message_of(e);
    task.work->mark_completed(std::make_exception_ptr(
        Error("[gloo] " + task.op + " failed on rank " + std::to_string(rank()) + " of " +
              std::to_string(size()) + ": " + message_of(e))));
  }
}

}  // namespace tandem::parallel
