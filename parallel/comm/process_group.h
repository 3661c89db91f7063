#pragma once
/// ProcessGroup: the collectives that DistributedDataParallel's Reducer needs (all-reduce,
/// broadcast, all-gather, barrier) over the ranks of a job, each returning an asynchronous Work.
///
/// Note [Collective order]: a group runs its collectives one at a time, in the order they were
/// submitted. Every rank must submit the same collectives in the same order (as with MPI, NCCL
/// and PyTorch); a rank that issues a different one, or none, makes the others time out.
///
/// Tensors are reduced in place and must stay alive and untouched until the Work completes; the
/// Work keeps a reference to them, so dropping the caller's handle early is safe.
///
///   auto group = init_process_group("gloo", from_environment());
///   auto work = group->allreduce({bucket}, ReduceOp::Avg);   // returns at once
///   ...                                                      // backward goes on
///   work->wait();                                            // bucket holds the average
///
/// Note [Work wait and synchronize]: wait() means "the result is ready for what the calling
/// thread does next", synchronize() means "the collective has finished, and the host knows".
/// For a backend that runs collectives on the host (Gloo) both block until the Work is done.
/// For NCCL, whose collectives run on a CUDA stream, wait() only makes the calling thread's
/// current stream of the device wait for the collective's end event (the host goes on, and
/// kernels queued next run after it: PyTorch's WorkNCCL::wait), while synchronize() blocks the
/// host until the collective has run (or failed, or timed out). Use synchronize() before the
/// host itself needs the collective done: before timing it, or where a failure must surface
/// now. Reading a CUDA result back (to_vector, item) after wait() is already safe: that copy
/// runs on the current stream, behind the wait. A barrier's wait() always blocks the host.

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "parallel/comm/launch_env.h"

namespace tandem::parallel {

enum class ReduceOp {
  Sum,
  Avg,  ///< sum / size; float tensors only
};

const char* reduce_op_name(ReduceOp op);

/// One asynchronous collective. A backend creates it when the collective is submitted and
/// finishes it when the collective has run.
class Work {
 public:
  using Clock = std::chrono::steady_clock;

  /// `description` names the collective in messages, e.g. "[gloo] allreduce #3 on rank 1 of 2";
  /// `default_timeout` bounds wait() without an argument.
  Work(std::string description, std::chrono::milliseconds default_timeout);
  virtual ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  /// Makes the result ready for the calling thread (Note [Work wait and synchronize]) and
  /// rethrows the collective's error. On a host backend (Gloo) this blocks until the collective
  /// is done and throws a tandem::Error naming the collective when `timeout` passes first (the
  /// collective itself goes on in the background until its own timeout, the group's
  /// options.timeout). On NCCL it orders the current stream after the collective and returns;
  /// errors found later surface from synchronize() and from the group's next collective.
  virtual void wait(std::chrono::milliseconds timeout);
  void wait() { wait(default_timeout_); }
  /// Blocks the host until the collective is done (and, like wait(), orders the calling thread's
  /// later work after it); rethrows its error; throws naming the collective when `timeout`
  /// passes first.
  virtual void synchronize(std::chrono::milliseconds timeout);
  void synchronize() { synchronize(default_timeout_); }
  /// Done, successfully or not; never blocks.
  virtual bool completed() const;
  /// Done with an error (wait() would throw it).
  virtual bool failed() const;

  /// When the collective started running and when it ended; a default-constructed time_point
  /// until then. For DDP's overlap instrumentation. Gloo: when its thread ran it. NCCL: when
  /// the group's watchdog saw the device reach and pass it (host times, late by up to the
  /// watchdog's poll interval, about 1 ms).
  virtual Clock::time_point started_at() const;
  virtual Clock::time_point ended_at() const;

  const std::string& description() const { return description_; }
  std::chrono::milliseconds default_timeout() const { return default_timeout_; }

  // --- for backends
  void mark_started();
  /// Completes the Work; `error` (may be null) is what wait() rethrows. Only the first call
  /// counts.
  void mark_completed(std::exception_ptr error = nullptr);

 protected:
  /// The end of synchronize() once its wait of `timeout` is over, without waiting: throws that
  /// the Work did not complete within `timeout`, or rethrows its error.
  void finish_synchronize(std::chrono::milliseconds timeout) const;

 private:
  const std::string description_;
  const std::chrono::milliseconds default_timeout_;
  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable done_;
  bool completed_ = false;
  std::exception_ptr error_;
  Clock::time_point started_at_{};
  Clock::time_point ended_at_{};
};

/// Throws "[<backend>] <op>: tensor <index> is uint8; supported: float32, bfloat16, float16[,
/// int64]" unless collectives take `dtype` (int64 only where `allow_int64`: sums, copies).
void check_collective_dtype(const char* backend, const std::string& op, size_t index, DType dtype,
                            bool allow_int64);

/// A Work that finishes what `work` started: its first wait() or synchronize() waits for `work`
/// and then runs `continuation` on the calling thread (once; not when `work` failed). Like
/// PyTorch's Future.then(), for communication hooks that post-process a collective's result
/// (Note [Gradient compression]). On NCCL the continuation queues its kernels on the calling
/// thread's current stream, behind the wait; synchronize() does not wait for those kernels.
/// completed(), started_at() and ended_at() are `work`'s.
std::shared_ptr<Work> then(std::shared_ptr<Work> work, std::function<void()> continuation);

struct ProcessGroupOptions {
  /// Bounds every collective and the rendezvous: a dead or silent peer turns into an error after
  /// this long instead of a hang. Also the default of Work::wait().
  std::chrono::milliseconds timeout{300000};
  /// Gloo: the network interface to use (e.g. "eth0"); overrides `hostname`.
  std::string interface {};
  /// Gloo: a hostname or address of this machine that the other ranks can reach. With neither
  /// set, init_process_group() picks loopback for one-machine jobs and this machine's hostname
  /// otherwise; GLOO_SOCKET_IFNAME in the environment also works, as in PyTorch.
  std::string hostname{};
};

class ProcessGroup {
 public:
  ProcessGroup(int rank, int size, ProcessGroupOptions options);
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const ProcessGroupOptions& options() const { return options_; }
  virtual std::string backend_name() const = 0;
  /// The device this group's collectives take tensors on: cpu for Gloo, the rank's GPU
  /// (cuda:<local rank>) for NCCL. DDP puts its small exchanges (the model check, the bucket
  /// order, used-parameter counts) there.
  virtual Device tensor_device() const = 0;

  /// Reduces each tensor across ranks, in place: every tensor is its own all-reduce (a list is a
  /// batch, not one reduction over the list). Tensors: contiguous float32, bfloat16 or float16
  /// (or int64 with Sum); a 16-bit sum adds in float and rounds once per addition.
  virtual std::shared_ptr<Work> allreduce(std::vector<Tensor> tensors, ReduceOp op) = 0;
  /// Copies each tensor of rank `root` into the same tensor on every other rank, in place.
  /// Tensors: contiguous float32, bfloat16, float16 or int64.
  virtual std::shared_ptr<Work> broadcast(std::vector<Tensor> tensors, int root) = 0;
  /// outputs[r] receives rank r's `input`; outputs must hold size() contiguous tensors of the
  /// input's shape and dtype and stay alive until the Work completes.
  virtual std::shared_ptr<Work> allgather(std::vector<Tensor>& outputs, const Tensor& input) = 0;
  /// Completes once every rank has reached it (and every earlier collective has run).
  virtual std::shared_ptr<Work> barrier() = 0;

 private:
  const int rank_;
  const int size_;
  const ProcessGroupOptions options_;
};

/// Copies `tensors` of rank `root` into the same tensors on every other rank, as one broadcast
/// per dtype of all of them flattened into one buffer (PyTorch's _broadcast_coalesced) rather
/// than one per tensor: DDP sends its module's buffers (57 small tensors in a ResNet-20) before
/// every forward, and each collective costs a round trip. Like Work::wait(), returns when the
/// tensors are ready for the calling thread. Every rank must pass tensors of the same dtypes and
/// sizes in the same order.
void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, int root);

/// Creates the group of this process from `env` (see launch_env.h): connects to the rendezvous
/// store at env.master_addr:master_port (hosting it on rank 0 unless the launcher does; a file
/// under file://, rendezvous.h), then builds the backend's group. backend: "gloo" (CPU tensors)
/// or "nccl" (CUDA tensors on cuda:<env.local_rank>; in a build without CUDA an error that says
/// so). The returned group keeps the store (and, on rank 0, the server) alive. The form of
/// torch.distributed, with an init method (env://, tcp://, file://), is in init_method.h.
std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend,
                                                 const DistributedEnv& env,
                                                 ProcessGroupOptions options = {});

}  // namespace tandem::parallel
