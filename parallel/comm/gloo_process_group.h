#pragma once
/// GlooProcessGroup: collectives on CPU tensors over TCP, with Gloo
/// (github.com/facebookincubator/gloo).
///
/// Note [Gloo thread]: one background thread per group drains a FIFO queue of collectives, so
/// allreduce() returns at once and the caller's backward pass goes on while the previous bucket
/// is reduced (Note [Collective order] in process_group.h). Arguments are checked on the
/// caller's thread, so a wrong tensor throws from allreduce() itself, not later from wait().
///
/// Note [Gloo failures]: every collective runs with the group's timeout, so a dead peer (its
/// connections reset) or a silent one (timeout) turns into "[gloo] allreduce failed on rank 1 of
/// 2: <Gloo's message>" from Work::wait(). Gloo then leaves its connections in an unknown state,
/// so the group is broken from then on: later collectives fail at once, naming the first error.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "parallel/comm/process_group.h"
#include "parallel/comm/store.h"

namespace gloo {
class Context;
}

namespace tandem::parallel {

class GlooProcessGroup final : public ProcessGroup {
 public:
  /// Rendezvous through `store` (each rank publishes its TCP addresses and connects to every
  /// other rank) and starts the group's thread. Groups created one after another on the same
  /// store get separate key spaces. Throws "[gloo] rendezvous failed on rank R of N: ..." when
  /// the other ranks do not show up within options.timeout.
  GlooProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                   ProcessGroupOptions options = {});
  /// Runs what is still queued (bounded by the timeout, and immediate once the group is broken),
  /// then joins the thread and closes the connections. Never throws.
  ~GlooProcessGroup() override;

  std::string backend_name() const override { return "gloo"; }
  Device tensor_device() const override { return Device::cpu(); }
  std::shared_ptr<Work> allreduce(std::vector<Tensor> tensors, ReduceOp op) override;
  std::shared_ptr<Work> broadcast(std::vector<Tensor> tensors, int root) override;
  std::shared_ptr<Work> allgather(std::vector<Tensor>& outputs, const Tensor& input) override;
  std::shared_ptr<Work> barrier() override;

 private:
  /// A queued collective. `run` gets the first Gloo tag it may use and returns how many it used.
  struct Task {
    std::shared_ptr<Work> work;
    std::string op;
    std::function<uint32_t(uint32_t first_tag)> run;
  };

  std::shared_ptr<Work> enqueue(const std::string& op, std::function<uint32_t(uint32_t)> run);
  void worker_loop();
  void run_task(Task& task);
  /// Checks tensors for `op` on the caller's thread (CPU, contiguous, supported dtype).
  void check_tensors(const std::string& op, const std::vector<Tensor>& tensors, bool allow_int64);

  std::shared_ptr<Store> store_;
  std::shared_ptr<gloo::Context> context_;

  std::mutex mutex_;  // guards queue_, stopping_ and submitted_
  std::condition_variable queued_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  uint64_t submitted_ = 0;  // collectives submitted so far, numbers them in messages

  // Only the worker thread touches these.
  uint32_t next_tag_ = 0;
  std::string broken_;  // the first failure; non-empty once the group is broken

  std::thread worker_;
};

}  // namespace tandem::parallel
