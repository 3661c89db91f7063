#pragma once
/// NcclProcessGroup: collectives on CUDA tensors with NCCL, one GPU per process (PyTorch's
/// ProcessGroupNCCL, simplified). Built only with the CUDA backend; this header names no CUDA or
/// NCCL type, so any build can include it, and make_nccl_process_group() of a build without
/// CUDA throws a one-line error saying so.
///
/// NEVER RUN ON A GPU YET: written and compiled against NCCL 2.28 on a machine without one; the
/// tests that exercise it on a GPU (NcclProcessGroupGpu.*, DdpNcclGpu.*) skip there. Its state
/// machine (below) is unit-tested on CPUs against a scripted fake NCCL (NcclApi) and a fake CUDA
/// runtime (NcclStateMachine.* in tests/parallel/comm/nccl/fake_nccl/).
///
/// Note [NCCL rendezvous]: rank 0 makes an ncclUniqueId and sets it in the store under a key of
/// this group's own (groups created one after another on a store count generations, as Gloo's
/// do); the other ranks get it, bounded by the set-up timeout (options.init_timeout, or
/// options.timeout when that is zero). The communicator is created non-blocking
/// (ncclConfig_t::blocking = 0), so its initialisation, and every later ncclGroupEnd that must
/// make progress with the peers (the lazy connection set-up of the first operations with each),
/// is polled with ncclCommGetAsyncError against the set-up timeout instead of hanging on a dead
/// peer; on timeout the communicator is aborted and the call throws. Set-up is not a
/// collective's run: an initialisation of hundreds of ms (more with other processes starting
/// NCCL at once) must not fail a group whose options.timeout is short to catch hung collectives
/// (review H1). The watchdog's options.timeout counts from when the Work was queued on the
/// device, after its ncclGroupEnd returned. No store barrier is needed
/// after it (Note [Rendezvous barrier] in gloo_process_group.cpp): a rank's initialisation only
/// finishes once every rank has joined, i.e. has read the id.
///
/// Note [NCCL stream order]: the group owns one non-blocking CUDA stream on its device. A
/// collective (1) makes that stream wait, with an event, for the calling thread's current stream
/// of the device, so it sees every kernel queued before it (the gradient copy into a DDP bucket);
/// (2) record_stream()s its tensors on the NCCL stream, so the caching allocator does not hand
/// their memory out again before the collective has run, however early the caller drops them;
/// (3) records a start event, queues the kernels that prepare its buffers (Note [NaN in NCCL min
/// and max] in nccl_collectives.cpp), the NCCL call(s) in one ncclGroupStart/End and the kernels
/// that finish them, then records an end event. Work::wait() makes the caller's current stream wait
/// for the end event and returns at once; Work::synchronize() blocks the host (Note [Work wait and
/// synchronize] in process_group.h), polling the end event itself (yielding for about 2 ms, then
/// every 100 µs) rather than waiting for the watchdog's next pass, until the event has passed, the
/// watchdog has failed the Work, or the timeout. A barrier is a one-element all-reduce whose wait()
/// blocks the host.
///
/// Note [NCCL watchdog]: one thread per group polls the pending collectives (about every
/// millisecond while any is pending): an end event that completed finishes its Work (unless
/// synchronize() saw it first); a Work
/// older than options.timeout, or an error from ncclCommGetAsyncError (a peer died, a network
/// error), makes the watchdog abort the communicator (ncclCommAbort, which also ends the NCCL
/// kernels waiting on the device, so streams that wait for them move on) and fail every pending
/// Work with one line naming the collective and the rank, e.g. "[nccl] allreduce #3 on rank 1 of
/// 2 did not complete within 5 s ...; the communicator was aborted". From then on the group is
/// broken: later collectives fail at once, naming the first failure. Because wait() does not
/// block, a failure after it surfaces from synchronize() or from the group's next collective;
/// the results of an aborted collective are undefined.
///
/// Note [NCCL point-to-point]: isend()/irecv() are ncclSend/ncclRecv launched like collectives,
/// each in its own ncclGroupStart/End on the group's stream in submission order (PyTorch's NCCL
/// group opens a communicator per pair of ranks for them; this one does not yet). NCCL's sends
/// and receives block the stream until the peer's side runs, and operations that must progress
/// together must be in one group: so Note [Collective order] applies to them too (two ranks must
/// post a send and its receive at the same place among their other operations), and an exchange
/// (rank 0 isend(1) then irecv(1), rank 1 isend(0) then irecv(0)) hangs once a message outgrows
/// NCCL's buffers, until the watchdog aborts. batch_isend_irecv() puts all its sends and
/// receives in one group, on the group's stream: the exchange's form on NCCL (review H2), as in
/// PyTorch. NCCL has no tags, so any tag but 0 is refused rather than ignored: Gloo matches
/// by tag, NCCL by order only, and a silently ignored tag would swap equal-size messages
/// received in another order (review H4). No receive from any source (refused). gather, scatter
/// and alltoall are sends and receives in one ncclGroupStart/End, as in PyTorch; a rank's own
/// part is a device copy. The group is closed even when queuing its calls throws (a failed
/// device copy), before the communicator is aborted (review H5).
///
/// Sub-groups (new_group) get a communicator of their own: the sub-group's rank 0 makes a new
/// ncclUniqueId and sets it in the store under a prefix of its parent's for that sub-group
/// (Note [NCCL rendezvous]), so creating one is a rendezvous of its members only.

#include <memory>
#include <string>
#include <vector>

#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/launch_env.h"
#include "parallel/comm/rendezvous/store.h"

namespace tandem::parallel {

class NcclApi;    // parallel/comm/nccl/nccl_api.h
struct NcclCall;  // parallel/comm/nccl/nccl_call.h

class NcclProcessGroup final : public ProcessGroup {
 public:
  /// Rendezvous through `store` (Note [NCCL rendezvous]) and an NCCL communicator on
  /// cuda:`device`, which must exist ("[nccl] rank 3 needs cuda:3 (its local rank), but this
  /// machine has 2 CUDA device(s) ..."). Throws "[nccl] rendezvous failed on rank R of N: ..."
  /// when the other ranks do not show up within options.timeout. Every NCCL call goes through
  /// `nccl` (real_nccl_api() but in tests), which must outlive the group.
  NcclProcessGroup(const std::shared_ptr<Store>& store, int rank, int size, int device,
                   ProcessGroupOptions options, NcclApi& nccl);
  /// Waits for the pending collectives (each bounded by options.timeout, after which the
  /// watchdog aborts), stops the watchdog and destroys the communicator. Never throws.
  ~NcclProcessGroup() override;

  std::string backend_name() const override { return "nccl"; }
  Device tensor_device() const override;

 protected:
  /// Tensors: dense CUDA tensors on tensor_device(). Avg and Product are NCCL's own (ncclAvg,
  /// ncclProd), as are Min and Max on int64; on the floating types Min and Max reduce ordered
  /// keys, so that a NaN comes out (Note [NaN in NCCL min and max] in nccl_collectives.cpp).
  /// NCCL reduces the 16-bit types natively.
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
  /// One group for every op (Note [NCCL point-to-point]); every op's Work is that one.
  std::vector<std::shared_ptr<Work>> run_batch_isend_irecv(std::vector<P2POp> ops) override;
  std::shared_ptr<ProcessGroup> make_subgroup(int index, int rank, int size,
                                              const std::vector<int>& ranks) override;
  void check_placement(const std::string& op, size_t index, const Tensor& tensor) const override;

 private:
  /// The store to meet on: the caller's (the group counts its generation on it, Note [NCCL
  /// rendezvous]) or a sub-group's, already scoped to its keys.
  struct MeetingStore {
    std::shared_ptr<Store> store;
    bool scoped = false;
  };
  NcclProcessGroup(const MeetingStore& store, int rank, int size, int device,
                   ProcessGroupOptions options, NcclApi& nccl);
  /// Runs `call` on the group's stream (Note [NCCL stream order]); `used` are the tensors it
  /// reads or writes; `host_blocking_wait`: wait() blocks the host (a barrier).
  /// nccl_collectives.cpp calls it for every operation.
  std::shared_ptr<Work> launch(const std::string& op, const std::vector<Tensor>& used,
                               const NcclCall& call, bool host_blocking_wait = false);

  struct State;
  std::unique_ptr<State> state_;
};

/// Whether this build has the NCCL backend (a build with CUDA does).
bool nccl_available();

/// The NCCL group of init_process_group("nccl", ...), on libnccl. In a build without CUDA it
/// throws "[nccl] this build has no CUDA ...".
std::shared_ptr<ProcessGroup> make_nccl_process_group(const std::shared_ptr<Store>& store, int rank,
                                                      int size, int device,
                                                      ProcessGroupOptions options);

/// Throws unless this process can use cuda:`device` for NCCL: "[nccl] this build has no CUDA
/// ...", "[nccl] rank 0 needs a GPU for the NCCL process group, but no CUDA device: ..." or
/// "[nccl] rank 3 needs cuda:3 (its local rank), but this machine has 2 CUDA device(s) ...".
void check_nccl_device(int rank, int device);

/// Note [NCCL device]: the GPU of a rank is cuda:local_rank, as with torchrun. The exception is a
/// launcher that evidently gave each rank a GPU of its own, so that each sees a single one: then
/// it is cuda:0, and `note` says so. The evidence, since a rank cannot see its peers' devices:
/// - CUDA_VISIBLE_DEVICES lists exactly one device (srun --gpus-per-task=1 or --gpu-bind, a
///   wrapper that sets CUDA_VISIBLE_DEVICES=$LOCAL_RANK);
/// - Slurm gave the step at least one GPU per local rank (SLURM_STEP_GPUS, else SLURM_JOB_GPUS)
///   while this rank sees one: per-task binding (cgroups) hid the others.
/// One visible GPU without that evidence is a one-GPU machine: several ranks on it would all take
/// cuda:0 and fail deep inside NCCL ("Duplicate GPU detected"). So fewer visible GPUs than local
/// ranks fails at once, on every rank, those below the count too (they would only wait for the
/// others in the rendezvous): "[nccl] rank 0: 2 processes on this machine need 2 GPUs, 1 is
/// visible (CUDA_VISIBLE_DEVICES unset); ...". Where ranks sharing a CUDA_VISIBLE_DEVICES of one
/// device were started anyway, creating the communicator still fails with NCCL's message.
struct NcclDeviceChoice {
  int device = 0;    ///< the CUDA device this rank uses
  std::string note;  ///< why it is not cuda:local_rank, a line to log; empty when it is
};
NcclDeviceChoice choose_nccl_device(int rank, int local_rank, int local_world_size,
                                    int device_count, const LauncherGpus& gpus);

/// The GPUs that `local_world_size` NCCL ranks on this machine need to see (Note [NCCL device]):
/// 1 where the launcher gave each its own, else local_world_size (rank r takes cuda:r).
int nccl_gpus_needed(int local_world_size, int device_count, const LauncherGpus& gpus);

/// The nccl branch of init_process_group(), before it touches the store (so a machine without a
/// GPU fails at once): check_nccl_device(), choose_nccl_device() on launcher_gpus() (its note
/// logged to stderr) and cuda::set_device() on the calling thread once, so that this thread
/// (the training loop) never initialises a context on another rank's GPU. Returns the device.
/// A build without CUDA throws "[nccl] this build has no CUDA ...".
int bind_nccl_device(int rank, int local_rank, int local_world_size);

/// Throws "[nccl] libnccl is 2.21.5, but Tandem was built with the NCCL 2.28 headers: ..."
/// unless the library (ncclGetVersion: 22805 for 2.28.5) is at least the headers' major.minor:
/// an older one may not know the fields of ncclConfig_t or the calls Tandem makes. (NCCL does not
/// say which CUDA it was built for; it carries its own CUDA runtime, so only the driver must be
/// new enough for it.)
void check_nccl_version(int library_version, int header_version);

/// The NCCL group's check_placement (no GPU needed): throws "[nccl] <op>: tensor <index> is on
/// cpu:0; the NCCL process group takes CUDA tensors on cuda:0 (use the gloo backend for CPU
/// tensors)" unless `tensor` is defined, on `device` and dense.
void check_nccl_placement(const std::string& op, size_t index, const Tensor& tensor, Device device);

}  // namespace tandem::parallel
