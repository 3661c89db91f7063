// The Gloo group itself: rendezvous, sub-groups, the queue and its thread (Note [Gloo thread]).
// The collectives are in gloo_collectives.cpp, the consistency check in gloo_consistency.cpp,
// point-to-point in gloo_point_to_point.cpp.
#include "parallel/comm/gloo/gloo_process_group.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <csignal>

#include "engine/error.h"
#include "engine/profiler.h"
#include "parallel/comm/gloo/gloo_waiters.h"
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

// Each rank counts the groups it created on this store; as every rank creates them in the same
// order, the k-th group of every rank meets under the same prefix, apart from earlier groups.
std::shared_ptr<Store> next_group_store(std::shared_ptr<Store> store, int rank) {
  TANDEM_CHECK(store != nullptr, "[gloo] GlooProcessGroup needs a store");
  const int64_t generation = store->add("gloo/groups_of_rank" + std::to_string(rank), 1);
  return std::make_shared<PrefixStore>("gloo/" + std::to_string(generation) + "/",
                                       std::move(store));
}

}  // namespace

GlooProcessGroup::GlooProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                                   ProcessGroupOptions options)
    : GlooProcessGroup(ScopedStore{next_group_store(std::move(store), rank)}, rank, size,
                       std::move(options)) {}

GlooProcessGroup::GlooProcessGroup(ScopedStore store, int rank, int size,
                                   ProcessGroupOptions options)
    : ProcessGroup(rank, size, std::move(options)), store_(std::move(store.store)) {
  ignore_sigpipe();
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
  waiters_ = std::make_unique<GlooWaiters>();
  worker_ = std::thread([this] { worker_loop(); });
}

GlooProcessGroup::~GlooProcessGroup() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  if (worker_.joinable()) worker_.join();
  waiters_.reset();  // ends the pending point-to-point operations, before their context goes
}

// Note [Collective order] holds per group: a sub-group has its own context and thread, so its
// collectives and this group's interleave freely. Its keys go under this group's, numbered by
// new_group() (every rank calls it in the same order).
std::shared_ptr<ProcessGroup> GlooProcessGroup::make_subgroup(int index, int rank, int size,
                                                              const std::vector<int>&) {
  auto store = std::make_shared<PrefixStore>("sub" + std::to_string(index) + "/", store_);
  return std::shared_ptr<GlooProcessGroup>(
      new GlooProcessGroup(ScopedStore{std::move(store)}, rank, size, options()));
}

void GlooProcessGroup::check_placement(const std::string& op, size_t index, const Tensor& t) const {
  TANDEM_CHECK(t.defined(), "[gloo] ", op, ": tensor ", index, " is undefined");
  TANDEM_CHECK(t.device().is_cpu(), "[gloo] ", op, ": tensor ", index, " is on ", t.device().str(),
               "; the Gloo process group takes CPU tensors for now (staging CUDA tensors "
               "through pinned memory is not written yet)");
  TANDEM_CHECK(t.is_dense(), "[gloo] ", op, ": tensor ", index,
               " is not dense (collectives work in place on contiguous or channels-last "
               "tensors)");
}

// --- the queue (Note [Gloo thread])

std::shared_ptr<Work> GlooProcessGroup::make_work(const std::string& what,
                                                  const std::string& detail) {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::make_shared<Work>("[gloo] " + what + " #" + std::to_string(++submitted_) +
                                    " on rank " + std::to_string(rank()) + " of " +
                                    std::to_string(size()) + detail,
                                options().timeout);
}

std::shared_ptr<Work> GlooProcessGroup::enqueue(const std::string& op, std::string call,
                                                std::function<uint32_t(uint32_t)> run,
                                                std::vector<int64_t> alltoall_counts) {
  std::shared_ptr<Work> work = make_work(op);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Task{work, op, std::move(call), std::move(alltoall_counts), std::move(run)});
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

std::string GlooProcessGroup::broken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

int64_t GlooProcessGroup::next_message_id(int dst) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (messages_sent_.empty()) messages_sent_.assign(static_cast<size_t>(size()), 0);
  return messages_sent_[static_cast<size_t>(dst)]++;
}

void GlooProcessGroup::set_broken(const std::string& failure) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (broken_.empty()) broken_ = failure;
}

void GlooProcessGroup::run_task(Task& task) {
  const profiler::RecordScope scope([&] { return "gloo " + task.op; },
                                    profiler::Category::Communication);
  task.work->mark_started();
  const std::string where = "on rank " + std::to_string(rank()) + " of " + std::to_string(size());
  if (const std::string failure = broken(); !failure.empty()) {
    task.work->mark_completed(std::make_exception_ptr(
        Error("[gloo] " + task.op + " not run " + where +
              ": the group is broken by an earlier failure (" + failure + ")")));
    return;
  }
  try {
    if (options().check_consistency && size() > 1) {
      const std::string mismatch = check_consistency(task);
      if (!mismatch.empty()) {
        // Every rank saw the same exchange and refused: the connections are fine.
        task.work->mark_completed(
            std::make_exception_ptr(Error("[gloo] " + task.op + " " + where + ": " + mismatch)));
        return;
      }
    }
    next_tag_ += task.run(next_tag_);
    task.work->mark_completed();
  } catch (const std::exception& e) {
    set_broken(message_of(e));
    task.work->mark_completed(std::make_exception_ptr(
        Error("[gloo] " + task.op + " failed " + where + ": " + message_of(e))));
  }
}

}  // namespace tandem::parallel
