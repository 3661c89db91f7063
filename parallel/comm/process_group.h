#pragma once
/// ProcessGroup: the collectives and point-to-point operations of torch.distributed over the
/// ranks of a job, each returning an asynchronous Work (work.h).
///
///   auto group = init_process_group("gloo", from_environment());
///   auto work = group->allreduce({bucket}, ReduceOp::Avg);   // returns at once
///   ...                                                      // backward goes on
///   work->wait();                                            // bucket holds the average
///
/// | torch.distributed                  | ProcessGroup                                        |
/// | ---------------------------------- | --------------------------------------------------- |
/// | all_reduce(t, op)                  | allreduce({t}, op)                                  |
/// | broadcast(t, src)                  | broadcast({t}, root)                                |
/// | reduce(t, dst, op)                 | reduce({t}, root, op)                               |
/// | all_gather(list, t)                | allgather(outputs, input)                           |
/// | all_gather_into_tensor(out, t)     | allgather_into_tensor(output, input)                |
/// | gather(t, list, dst)               | gather(outputs, input, root)                        |
/// | scatter(t, list, src)              | scatter(output, inputs, root)                       |
/// | reduce_scatter(t, list, op)        | reduce_scatter(output, inputs, op)                  |
/// | reduce_scatter_tensor(out, t, op)  | reduce_scatter_tensor(output, input, op)            |
/// | all_to_all(outs, ins)              | alltoall(outputs, inputs)                           |
/// | all_to_all_single(out, in, os, is) | alltoall_single(output, input, os, is)              |
/// | barrier()                          | barrier()                                           |
/// | isend / irecv / send / recv        | isend / irecv / send / recv (with tags)             |
/// | batch_isend_irecv(p2p_op_list)     | batch_isend_irecv(ops)                              |
/// | new_group(ranks)                   | new_group(world, ranks) or world.new_group(ranks)   |
///
/// Note [Collective order]: a group runs its collectives one at a time, in the order they were
/// submitted. Every rank of the group must submit the same collectives in the same order (as
/// with MPI, NCCL and PyTorch); a rank that issues a different one, or none, makes the others
/// time out, unless the group's consistency check catches it first (Note [Collective
/// consistency]). Point-to-point operations are not collectives: on Gloo and MPI they start at
/// once, beside the queued collectives, and match the peer's by (peer, tag) in the order each
/// side posted them; on NCCL they join the collectives' queue (Note [NCCL point-to-point]).
///
/// Tensors are reduced and written in place and must stay alive and untouched until the Work
/// completes; the Work keeps a reference to them, so dropping the caller's handle early is safe.
/// Every argument is checked on the caller's thread: a wrong tensor throws from the call itself,
/// never from wait(), and queues nothing. Dtypes: float32, bfloat16, float16 and int64 (not
/// uint8); reductions as in reduce_op_supports(). A 16-bit reduction widens both operands to
/// float, combines them and rounds back, once per step (NCCL's native bfloat16/float16 do the
/// same); Avg is, on Gloo and MPI, the sum scaled by 1/size in float and rounded once more, on
/// NCCL its own ncclAvg.
///
/// Note [Flat collectives]: a backend implements each collective once, on flat buffers (the
/// protected run_* hooks); the list forms (allgather, gather, scatter, reduce_scatter, alltoall)
/// are written once, here, on top of them: inputs are concatenated into one buffer on the
/// caller's thread, and outputs are copied out of one by a then() continuation, on the thread
/// that waits. So the list forms cost one copy more than the flat ones (which PyTorch's Gloo
/// costs too) and their outputs hold the result only after wait(), which is the rule anyway.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "parallel/comm/types.h"
#include "parallel/comm/work.h"

namespace tandem::parallel {

/// One operation of batch_isend_irecv() (torch.distributed.P2POp): send `tensor` to rank
/// `peer`, or receive into it from rank `peer` (never kAnySource), with `tag`.
struct P2POp {
  enum class Kind { Send, Recv };
  Kind kind = Kind::Send;
  Tensor tensor;
  int peer = 0;
  int tag = 0;

  static P2POp send(Tensor tensor, int dst, int tag = 0) {
    return {Kind::Send, std::move(tensor), dst, tag};
  }
  static P2POp recv(Tensor tensor, int src, int tag = 0) {
    return {Kind::Recv, std::move(tensor), src, tag};
  }
};

struct ProcessGroupOptions {
  /// Bounds every collective and the rendezvous: a dead or silent peer turns into an error after
  /// this long instead of a hang. Also the default of Work::wait().
  std::chrono::milliseconds timeout{300000};
  /// NCCL: bounds, instead of `timeout`, what only sets the group up: the rendezvous, creating
  /// the communicator (plugins, topology search, device memory, proxy threads: hundreds of ms,
  /// more while other processes start NCCL too) and the connections NCCL makes inside the
  /// ncclGroupEnd of the first operation with each peer. So a short `timeout` that catches a hung
  /// collective does not also fail the start (Note [NCCL rendezvous]). Zero: `timeout`. Gloo and
  /// MPI bound their set-up with `timeout`.
  std::chrono::milliseconds init_timeout{0};
  /// Gloo: the network interface to use (e.g. "eth0"); overrides `hostname`.
  std::string interface {};
  /// Gloo: a hostname or address of this machine that the other ranks can reach. With neither
  /// set, init_process_group() picks loopback for one-machine jobs and this machine's hostname
  /// otherwise; GLOO_SOCKET_IFNAME in the environment also works, as in PyTorch.
  std::string hostname{};
  /// Note [Collective consistency]: before each collective the ranks compare what they were
  /// asked to run (collective, root, reduce op, dtypes, element counts; for alltoall who sends
  /// whom how many), and a difference fails that collective on every rank with one line naming
  /// each rank's call, instead of a hang, a crash in the transport or wrong data. PyTorch does
  /// this only under TORCH_DISTRIBUTED_DEBUG=DETAIL. It costs one small all-gather per
  /// collective (two for alltoall); turn it off for latency-bound benchmarks. Gloo and MPI:
  /// NCCL cannot compare on the host without blocking, so it does not check.
  bool check_consistency = true;
};

class ProcessGroup {
 public:
  ProcessGroup(int rank, int size, ProcessGroupOptions options);
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  /// This process's rank in the group, 0..size()-1; -1 on a rank outside a sub-group (which
  /// refuses every operation: see new_group()).
  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_member() const { return rank_ >= 0; }
  const ProcessGroupOptions& options() const { return options_; }
  virtual std::string backend_name() const = 0;
  /// The device this group's collectives take tensors on: cpu for Gloo, the rank's GPU
  /// (cuda:<local rank>) for NCCL. DDP puts its small exchanges (the model check, the bucket
  /// order, used-parameter counts) there.
  virtual Device tensor_device() const = 0;

  // --- collectives (Note [Collective order]); roots are ranks of this group

  /// Reduces each tensor across ranks, in place: every tensor is its own all-reduce (a list is a
  /// batch, not one reduction over the list).
  std::shared_ptr<Work> allreduce(std::vector<Tensor> tensors, ReduceOp op = ReduceOp::Sum);
  /// Copies each tensor of rank `root` into the same tensor on every other rank, in place.
  std::shared_ptr<Work> broadcast(std::vector<Tensor> tensors, int root);
  /// Reduces each tensor across ranks into rank `root`'s tensor, in place; the other ranks'
  /// tensors keep their values (PyTorch leaves them undefined).
  std::shared_ptr<Work> reduce(std::vector<Tensor> tensors, int root, ReduceOp op = ReduceOp::Sum);
  /// outputs[r] receives rank r's `input`: size() tensors of the input's shape and dtype.
  std::shared_ptr<Work> allgather(std::vector<Tensor>& outputs, const Tensor& input);
  /// `output` (contiguous, size() × input.numel() elements of the input's dtype, any shape)
  /// receives rank r's `input` at elements [r·n, (r+1)·n). `input` may be that very chunk of
  /// `output` (in place, as sharded data parallel gathers its parameters).
  std::shared_ptr<Work> allgather_into_tensor(Tensor output, Tensor input);
  /// On rank `root`, outputs[r] receives rank r's `input` (size() tensors of its shape and
  /// dtype); on the other ranks `outputs` must be empty.
  std::shared_ptr<Work> gather(std::vector<Tensor> outputs, const Tensor& input, int root);
  /// `output` receives inputs[r] of rank `root` on rank r: on root, size() tensors of the
  /// output's shape and dtype; on the other ranks `inputs` must be empty.
  std::shared_ptr<Work> scatter(Tensor output, const std::vector<Tensor>& inputs, int root);
  /// `output` on rank r receives the reduction over ranks of their inputs[r] (size() tensors of
  /// the output's shape and dtype). The inputs keep their values.
  std::shared_ptr<Work> reduce_scatter(Tensor output, const std::vector<Tensor>& inputs,
                                       ReduceOp op = ReduceOp::Sum);
  /// The flat form (torch's reduce_scatter_tensor): `input` (contiguous, size() × n elements)
  /// is size() consecutive chunks of n; `output` (contiguous, n elements) on rank r receives
  /// the reduction over ranks of chunk r. Sharded data parallel calls it bucket by bucket, each
  /// bucket padded to a multiple of size(). The input keeps its values.
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor output, Tensor input,
                                              ReduceOp op = ReduceOp::Sum);
  /// outputs[r] receives rank r's inputs[this rank]. size() inputs and size() outputs of one
  /// dtype, of any sizes, as long as each rank's inputs[s] has as many elements as rank s's
  /// outputs[r] (Note [Collective consistency] checks that on Gloo).
  std::shared_ptr<Work> alltoall(std::vector<Tensor> outputs, std::vector<Tensor> inputs);
  /// torch's all_to_all_single: `input` (contiguous) is split along dim 0 into size() parts,
  /// part s going to rank s, and `output` (contiguous, the same dtype and row size) receives
  /// rank r's part for this rank as its r-th part. Without split sizes every part has
  /// dim0 / size() rows (dim 0 divisible by size()); with them input_split_sizes[s] rows go to
  /// rank s and output_split_sizes[r] rows come from rank r (uneven all-to-all), summing to
  /// input.size(0) and output.size(0).
  std::shared_ptr<Work> alltoall_single(Tensor output, Tensor input,
                                        const std::vector<int64_t>& output_split_sizes = {},
                                        const std::vector<int64_t>& input_split_sizes = {});
  /// Completes once every rank has reached it (and every earlier collective has run).
  std::shared_ptr<Work> barrier();

  // --- point-to-point

  /// Sends `tensor` (contiguous) to rank `dst` of this group; it must stay untouched until the
  /// Work completes. The receiver's irecv() with the same tag (≥ 0) and as many elements of the
  /// same dtype gets it; messages between two ranks with one tag arrive in the order sent.
  /// NCCL has no tags: it refuses any but 0, and matches by order alone (Note [NCCL
  /// point-to-point]); a rank that must send and receive at once uses batch_isend_irecv().
  std::shared_ptr<Work> isend(Tensor tensor, int dst, int tag = 0);
  /// Receives into `tensor` (contiguous) from rank `src` of this group, or from whichever rank
  /// sends with `tag` first when `src` is kAnySource (Gloo and MPI; Work::source_rank() then
  /// says who).
  std::shared_ptr<Work> irecv(Tensor tensor, int src, int tag = 0);
  /// isend(tensor, dst, tag)->wait().
  void send(Tensor tensor, int dst, int tag = 0);
  /// irecv(tensor, src, tag)->wait(); returns the rank it came from.
  int recv(Tensor tensor, int src, int tag = 0);
  /// Starts every send and receive of `ops` together and returns one Work per op, in order, as
  /// torch.distributed.batch_isend_irecv does. On NCCL they are one ncclGroupStart/End, which
  /// NCCL needs for operations that must progress together: two ranks that each isend() and
  /// then irecv() one another hang there once a message outgrows NCCL's buffers, as each send
  /// waits for a receive queued behind the peer's own send; every Work returned is then that
  /// one group's (its source_rank() is -1: each op names its peer). On Gloo and MPI each op is
  /// an isend() or irecv(). The checks are isend()'s and irecv()'s, and no receive from
  /// kAnySource.
  std::vector<std::shared_ptr<Work>> batch_isend_irecv(std::vector<P2POp> ops);

  // --- sub-groups

  /// A group of `ranks` (ranks of this group, distinct, any order; the new group numbers them
  /// in ascending order, as PyTorch does) with its own connections (Gloo context, NCCL
  /// communicator), so its collectives and this group's interleave safely. EVERY rank of this
  /// group must call new_group(), with the same ranks, in the same order relative to its other
  /// new_group() calls (as in PyTorch): the k-th call of every rank meets under the k-th
  /// prefix of this group's store. The members wait here until all of them have joined (bounded
  /// by options.timeout); a rank outside gets a group whose rank() is -1 and that refuses every
  /// operation with one line (PyTorch's GroupMember.NON_GROUP_MEMBER, which does nothing
  /// instead). A sub-group may outlive this group.
  std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks);

 protected:
  /// What a backend implements (Note [Flat collectives]). The arguments are checked already;
  /// `op` names the user's call for messages and Work descriptions ("allgather" also when it
  /// runs as run_allgather). Each returns at once with a Work. Element counts are per rank, in
  /// elements of the tensors' dtype.
  virtual std::shared_ptr<Work> run_allreduce(const std::string& op, std::vector<Tensor> tensors,
                                              ReduceOp reduce_op) = 0;
  virtual std::shared_ptr<Work> run_broadcast(const std::string& op, std::vector<Tensor> tensors,
                                              int root) = 0;
  /// The other ranks' tensors must keep their values.
  virtual std::shared_ptr<Work> run_reduce(const std::string& op, std::vector<Tensor> tensors,
                                           int root, ReduceOp reduce_op) = 0;
  /// output: size() × input.numel() elements.
  virtual std::shared_ptr<Work> run_allgather(const std::string& op, Tensor output,
                                              Tensor input) = 0;
  /// output: size() × input.numel() elements on root; undefined elsewhere.
  virtual std::shared_ptr<Work> run_gather(const std::string& op, Tensor output, Tensor input,
                                           int root) = 0;
  /// input: size() × output.numel() elements on root; undefined elsewhere.
  virtual std::shared_ptr<Work> run_scatter(const std::string& op, Tensor output, Tensor input,
                                            int root) = 0;
  /// input: size() × output.numel() elements.
  virtual std::shared_ptr<Work> run_reduce_scatter(const std::string& op, Tensor output,
                                                   Tensor input, ReduceOp reduce_op) = 0;
  /// input_counts[s] elements of input go to rank s, in rank order; output_counts[r] elements
  /// of output come from rank r.
  virtual std::shared_ptr<Work> run_alltoall(const std::string& op, Tensor output, Tensor input,
                                             std::vector<int64_t> output_counts,
                                             std::vector<int64_t> input_counts) = 0;
  virtual std::shared_ptr<Work> run_barrier(const std::string& op) = 0;
  virtual std::shared_ptr<Work> run_send(Tensor tensor, int dst, int tag) = 0;
  /// src may be kAnySource; the Work sets its source_rank().
  virtual std::shared_ptr<Work> run_recv(Tensor tensor, int src, int tag) = 0;
  /// One Work per op, in order; by default run_send() and run_recv() for each.
  virtual std::vector<std::shared_ptr<Work>> run_batch_isend_irecv(std::vector<P2POp> ops);
  /// The member `rank` of `size` of the `index`-th sub-group of this group (new_group()
  /// counted it); its store keys go under a prefix of this group's own for that index.
  /// `ranks`: the members, ranks of this group in ascending order (MPI makes their
  /// communicator from them).
  virtual std::shared_ptr<ProcessGroup> make_subgroup(int index, int rank, int size,
                                                      const std::vector<int>& ranks) = 0;
  /// Throws "[<backend>] <op>: tensor <index> is on cuda:0; <why this group takes only ...>"
  /// unless `tensor` is defined, on tensor_device() and dense.
  virtual void check_placement(const std::string& op, size_t index, const Tensor& tensor) const = 0;

  /// For the group a non-member gets from new_group(): rank() is -1; `ranks` are the members'
  /// ranks in the parent group, for messages.
  struct NonMember {
    std::vector<int> ranks;
  };
  ProcessGroup(NonMember non_member, ProcessGroupOptions options);

 private:
  /// Throws "[<backend>] <op>: rank ... is not a member of this group ..." on a non-member.
  void check_member(const std::string& op) const;
  /// check_placement, the dtype and, with `reduce_op`, whether it reduces that dtype.
  void check_tensors(const std::string& op, const std::vector<Tensor>& tensors,
                     const ReduceOp* reduce_op) const;
  void check_root(const std::string& op, int root) const;
  /// isend()'s and irecv()'s checks of `tensor`, the peer and the tag.
  void check_point_to_point(const std::string& op, const Tensor& tensor, int peer, int tag,
                            bool receive) const;

  const int rank_;
  const int size_;
  const ProcessGroupOptions options_;
  const std::vector<int> members_in_parent_;  // a non-member's group only: who is in it
  std::mutex subgroups_mutex_;                // guards subgroups_made_
  int subgroups_made_ = 0;  // new_group() calls so far: numbers the next sub-group
};

/// The free form of world.new_group(ranks), as torch.distributed.new_group(ranks) reads.
std::shared_ptr<ProcessGroup> new_group(ProcessGroup& world, const std::vector<int>& ranks);

/// Copies `tensors` of rank `root` into the same tensors on every other rank, as one broadcast
/// per dtype of all of them flattened into one buffer (PyTorch's _broadcast_coalesced) rather
/// than one per tensor: DDP sends its module's buffers (57 small tensors in a ResNet-20) before
/// every forward, and each collective costs a round trip. Like Work::wait(), returns when the
/// tensors are ready for the calling thread. Every rank must pass tensors of the same dtypes and
/// sizes in the same order.
void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, int root);

}  // namespace tandem::parallel
