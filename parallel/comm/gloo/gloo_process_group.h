#pragma once
/// GlooProcessGroup: collectives and point-to-point operations on CPU tensors over TCP, with
/// Gloo (github.com/facebookincubator/gloo).
///
/// Note [Gloo thread]: one background thread per group drains a FIFO queue of collectives, so
/// allreduce() returns at once and the caller's backward pass goes on while the previous bucket
/// is reduced (Note [Collective order] in process_group.h). Arguments are checked on the
/// caller's thread, so a wrong tensor throws from allreduce() itself, not later from wait().
/// Before each collective the thread compares the ranks' calls (Note [Collective
/// consistency]; gloo_consistency.cpp).
///
/// Note [Gloo point-to-point]: isend()/irecv() post Gloo unbound-buffer operations on the
/// caller's thread at once, beside the queued collectives (as PyTorch's Gloo group does), so
/// they match the peer's by (peer, tag) whatever collectives are pending. Each message is a
/// small header and its payload, so that a receive of another size or dtype fails with one line
/// instead of Gloo aborting the process (Note [Gloo message header] in gloo_point_to_point.cpp);
/// their slots never meet a collective's. Gloo has no way to ask whether an operation has
/// completed without waiting for it, and its wait breaks the whole context when it times out,
/// so each pending operation is waited for, bounded by options.timeout, on a thread of a small
/// pool (GlooWaiters) that completes its Work: wait(timeout) then only waits for the Work,
/// completed() never blocks, and a short wait() leaves the operation running. A receive from
/// kAnySource is Gloo's receive from a list of ranks (every other one).
///
/// Note [Gloo failures]: every collective runs with the group's timeout, so a dead peer (its
/// connections reset) or a silent one (timeout) turns into "[gloo] allreduce failed on rank 1 of
/// 2: <Gloo's message>" from Work::wait(). Gloo then leaves its connections in an unknown state,
/// so the group is broken from then on: later operations fail at once, naming the first error.
/// A collective the consistency check refuses does not break the group: no rank ran it.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/store.h"

namespace gloo {
class Context;
}

namespace tandem::parallel {

class GlooWaiters;  // gloo_waiters.h

class GlooProcessGroup final : public ProcessGroup {
 public:
  /// Rendezvous through `store` (each rank publishes its TCP addresses and connects to every
  /// other rank) and starts the group's thread. Groups created one after another on the same
  /// store get separate key spaces. Throws "[gloo] rendezvous failed on rank R of N: ..." when
  /// the other ranks do not show up within options.timeout.
  GlooProcessGroup(std::shared_ptr<Store> store, int rank, int size,
                   ProcessGroupOptions options = {});
  /// Runs what is still queued (bounded by the timeout, and immediate once the group is broken),
  /// ends the point-to-point operations still pending (their Works fail), then joins the threads
  /// and closes the connections. Never throws.
  ~GlooProcessGroup() override;

  std::string backend_name() const override { return "gloo"; }
  Device tensor_device() const override { return Device::cpu(); }

 protected:
  std::shared_ptr<Work> run_allreduce(const std::string& op, std::vector<Tensor> tensors,
                                      ReduceOp reduce_op) override;
  std::shared_ptr<Work> run_broadcast(const std::string& op, std::vector<Tensor> tensors,
                                      int root) override;
  std::shared_ptr<Work> run_reduce(const std::string& op, std::vector<Tensor> tensors, int root,
                                   ReduceOp reduce_op) override;
  std::shared_ptr<Work> run_allgather(const std::string& op, Tensor output, Tensor input) override;
  std::shared_ptr<Work> run_gather(const std::string& op, Tensor output, Tensor input,
                                   int root) override;
  std::shared_ptr<Work> run_scatter(const std::string& op, Tensor output, Tensor input,
                                    int root) override;
  std::shared_ptr<Work> run_reduce_scatter(const std::string& op, Tensor output, Tensor input,
                                           ReduceOp reduce_op) override;
  std::shared_ptr<Work> run_alltoall(const std::string& op, Tensor output, Tensor input,
                                     std::vector<int64_t> output_counts,
                                     std::vector<int64_t> input_counts) override;
  std::shared_ptr<Work> run_barrier(const std::string& op) override;
  std::shared_ptr<Work> run_send(Tensor tensor, int dst, int tag) override;
  std::shared_ptr<Work> run_recv(Tensor tensor, int src, int tag) override;
  std::shared_ptr<ProcessGroup> make_subgroup(int index, int rank, int size,
                                              const std::vector<int>& ranks) override;
  void check_placement(const std::string& op, size_t index, const Tensor& tensor) const override;

 private:
  /// A queued collective. `call` describes it for the consistency check (describe_call), with
  /// `alltoall_counts` (what alltoall sends to, then receives from, each rank; empty for other
  /// collectives). `run` gets the first Gloo tag it may use and returns how many it used.
  struct Task {
    std::shared_ptr<Work> work;
    std::string op;
    std::string call;
    std::vector<int64_t> alltoall_counts;
    std::function<uint32_t(uint32_t first_tag)> run;
  };
  /// A sub-group's or the public constructor's store, already scoped to this group's keys.
  struct ScopedStore {
    std::shared_ptr<Store> store;
  };
  GlooProcessGroup(ScopedStore store, int rank, int size, ProcessGroupOptions options);

  /// Queues a Task (see there) and returns its Work.
  std::shared_ptr<Work> enqueue(const std::string& op, std::string call,
                                std::function<uint32_t(uint32_t first_tag)> run,
                                std::vector<int64_t> alltoall_counts = {});
  /// A Work numbered in submission order: "[gloo] <what> #<n> on rank R of N<detail>".
  std::shared_ptr<Work> make_work(const std::string& what, const std::string& detail = "");
  /// Note [Gloo point-to-point]: runs `start` (which posts the operation), or fails `work` at
  /// once when the group is broken or Gloo refuses; whether it was posted.
  bool post(Work& work, const std::function<void()>& start);
  /// Runs `body` (an operation's waits) on a waiter thread and completes `work` with its
  /// outcome; `abort` ends the waits early when the group is destroyed.
  void complete_later(const std::shared_ptr<Work>& work, std::function<void()> body,
                      std::function<void()> abort);
  /// The id of the next message to `dst` (Note [Gloo message header]).
  int64_t next_message_id(int dst);
  void worker_loop();
  void run_task(Task& task);
  /// Note [Collective consistency]: "" when the ranks agree on `task`, else why not. Advances
  /// next_tag_ by the tags it used.
  std::string check_consistency(const Task& task);
  /// The first failure, or "" while the group works (any thread).
  std::string broken() const;
  void set_broken(const std::string& failure);

  std::shared_ptr<Store> store_;  // this group's keys (a PrefixStore)
  std::shared_ptr<gloo::Context> context_;

  mutable std::mutex mutex_;  // guards queue_, stopping_, submitted_, broken_, messages_sent_
  std::condition_variable queued_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  uint64_t submitted_ = 0;              // operations submitted so far, numbers them in messages
  std::string broken_;                  // the first failure; non-empty once the group is broken
  std::vector<int64_t> messages_sent_;  // per destination rank, numbers isend()'s messages

  uint32_t next_tag_ = 0;  // the worker thread's only

  std::unique_ptr<GlooWaiters> waiters_;  // Note [Gloo point-to-point]
  std::thread worker_;
};

}  // namespace tandem::parallel
