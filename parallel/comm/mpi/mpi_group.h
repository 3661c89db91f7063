#pragma once
/// MpiProcessGroup: the MPI backend's ProcessGroup (mpi_process_group.h is its public face).
/// Internal: it includes <mpi.h>. Each group owns a communicator (the world group a duplicate
/// of MPI_COMM_WORLD, a sub-group one made by MPI_Comm_create_group) and a lane of the engine
/// (Note [MPI lanes] in mpi_engine.h); its operations are non-blocking MPI calls posted and
/// tested by the engine's thread (Note [MPI progress]).
///
/// Note [MPI failures]: the group's communicators return errors (MPI_ERRORS_RETURN) instead of
/// aborting, so an MPI error becomes "[mpi] allreduce failed on rank 1 of 2: <MPI's message>"
/// from Work::wait(), and the group is broken from then on (later operations fail at once,
/// naming the first failure), as a Gloo group is. A point-to-point error (a message longer
/// than the receiving tensor) fails that operation only. A collective the consistency check
/// refuses (Note [Collective consistency]; the same exchanges as Gloo's, non-blocking) breaks
/// nothing. A peer that dies or hangs ends the job (Note [MPI timeouts]).

#include <mpi.h>

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/comm/mpi/mpi_engine.h"
#include "parallel/comm/process_group.h"

namespace tandem::parallel {

class MpiProcessGroup final : public ProcessGroup {
 public:
  /// A group on `comm`, which it owns (frees when destroyed) and whose error handler it sets.
  MpiProcessGroup(std::shared_ptr<MpiEngine> engine, MPI_Comm comm, ProcessGroupOptions options);
  /// Frees the communicator once everything this group queued has run; returns at once (the
  /// operations keep their tensors alive, and the engine finishes them before MPI_Finalize).
  ~MpiProcessGroup() override;

  std::string backend_name() const override { return "mpi"; }
  /// CPU: DDP over MPI trains on CPUs. CUDA tensors are taken too where MPI is CUDA-aware
  /// (check_placement).
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
  /// CPU tensors; CUDA ones only where MPI is CUDA-aware (MpiEngine::cuda_aware()).
  void check_placement(const std::string& op, size_t index, const Tensor& tensor) const override;

 private:
  /// What the group's operations share with it, alive as long as any of them.
  struct Shared {
    MPI_Comm comm = MPI_COMM_NULL;
    int rank = 0;
    int size = 1;
    std::mutex mutex;    // guards broken
    std::string broken;  // the first failure (Note [MPI failures]); empty while the group works
  };

  /// A collective on this group's lane: the consistency check of `call` (and, for alltoall,
  /// `alltoall_counts`: what it sends to, then receives from, each rank) when the options ask
  /// for it, then `stages`, which post the collective on the communicator they are given.
  std::shared_ptr<Work> collective(const std::string& op, std::string call,
                                   std::vector<int64_t> alltoall_counts,
                                   std::deque<MpiOperation::Stage> stages);
  /// A point-to-point operation ("isend", " to rank 1, tag 0"): `post`, then `finish` once its
  /// request completed. Starts at once, outside the lane, unless the group is broken.
  std::shared_ptr<Work> point_to_point(const std::string& what, const std::string& detail,
                                       MpiOperation::Stage post, MpiOperation::Stage finish);
  /// The first stage of every operation: fails it, without running the rest, when the group is
  /// broken (Note [MPI failures]). `where`: "allreduce on rank 1 of 2".
  MpiOperation::Stage unless_broken(const std::string& where) const;
  /// A Work numbered in submission order: "[mpi] <what> #<n> on rank R of N<detail>".
  std::shared_ptr<Work> make_work(const std::string& what, const std::string& detail = "");
  /// Where MPI is CUDA-aware: waits for the CUDA tensors' devices, since MPI reads and writes
  /// device memory outside CUDA's streams.
  static void wait_for_devices(const std::vector<Tensor>& tensors);
  /// Throws "[mpi] <op>: ... elements; MPI counts are int" unless `count` fits an int.
  static int count_of(const std::string& op, int64_t count);

  std::shared_ptr<MpiEngine> engine_;
  std::shared_ptr<Shared> shared_;
  uint64_t lane_ = 0;
  std::atomic<uint64_t> submitted_{0};
};

}  // namespace tandem::parallel
