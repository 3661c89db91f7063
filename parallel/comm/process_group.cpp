// ProcessGroup's public operations: the argument checks every backend shares, then the backend's
// run_* hook (Note [Flat collectives]). The list forms are in list_collectives.cpp.
#include "parallel/comm/process_group.h"

#include <algorithm>

#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/ops/concat.h"
#include "parallel/comm/collective_checks.h"

namespace tandem::parallel {
namespace {

// "0, 1 and 3".
std::string numbers(const std::vector<int>& ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += (i + 1 == ranks.size()) ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

}  // namespace

ProcessGroup::ProcessGroup(int rank, int size, ProcessGroupOptions options)
    : rank_(rank), size_(size), options_(std::move(options)) {
  TANDEM_CHECK(size >= 1, "[process_group] size must be at least 1, got ", size);
  TANDEM_CHECK(rank >= 0 && rank < size, "[process_group] rank ", rank, " is out of range for ",
               size, " ranks");
  TANDEM_CHECK(options_.timeout.count() > 0, "[process_group] timeout must be positive");
  TANDEM_CHECK(options_.init_timeout.count() >= 0,
               "[process_group] init_timeout must not be negative (0: the timeout)");
}

ProcessGroup::ProcessGroup(NonMember non_member, ProcessGroupOptions options)
    : rank_(-1),
      size_(static_cast<int>(non_member.ranks.size())),
      options_(std::move(options)),
      members_in_parent_(std::move(non_member.ranks)) {}

ProcessGroup::~ProcessGroup() = default;

// --- checks

void ProcessGroup::check_member(const std::string& op) const {
  TANDEM_CHECK(is_member(), "[", backend_name(), "] ", op,
               ": this rank is not a member of this group (ranks ", numbers(members_in_parent_),
               " of the group it was made from); new_group() gives the ranks outside a group that "
               "refuses every operation");
}

void ProcessGroup::check_tensors(const std::string& op, const std::vector<Tensor>& tensors,
                                 const ReduceOp* reduce_op) const {
  const std::string backend = backend_name();
  for (size_t i = 0; i < tensors.size(); ++i) {
    check_placement(op, i, tensors[i]);
    if (reduce_op != nullptr) {
      check_reduce_dtype(backend.c_str(), op, i, tensors[i].dtype(), *reduce_op);
    } else {
      check_collective_dtype(backend.c_str(), op, i, tensors[i].dtype());
    }
  }
}

void ProcessGroup::check_root(const std::string& op, int root) const {
  TANDEM_CHECK(root >= 0 && root < size(), "[", backend_name(), "] ", op, ": root ", root,
               " is out of range for ", size(), " ranks");
}

// --- collectives on tensors in place

std::shared_ptr<Work> ProcessGroup::allreduce(std::vector<Tensor> tensors, ReduceOp op) {
  check_member("allreduce");
  check_tensors("allreduce", tensors, &op);
  return run_allreduce("allreduce", std::move(tensors), op);
}

std::shared_ptr<Work> ProcessGroup::broadcast(std::vector<Tensor> tensors, int root) {
  check_member("broadcast");
  check_root("broadcast", root);
  check_tensors("broadcast", tensors, nullptr);
  return run_broadcast("broadcast", std::move(tensors), root);
}

std::shared_ptr<Work> ProcessGroup::reduce(std::vector<Tensor> tensors, int root, ReduceOp op) {
  check_member("reduce");
  check_root("reduce", root);
  check_tensors("reduce", tensors, &op);
  return run_reduce("reduce", std::move(tensors), root, op);
}

std::shared_ptr<Work> ProcessGroup::barrier() {
  check_member("barrier");
  return run_barrier("barrier");
}

// --- point-to-point

void ProcessGroup::check_point_to_point(const std::string& op, const Tensor& tensor, int peer,
                                        int tag, bool receive) const {
  const std::string backend = backend_name();
  if (receive) {
    TANDEM_CHECK(size() > 1, "[", backend, "] ", op,
                 ": a group of one rank has no one to receive from");
  }
  check_tensors(op, {tensor}, nullptr);
  TANDEM_CHECK(tensor.is_contiguous(), "[", backend, "] ", op, ": the tensor is not contiguous");
  const char* peer_name = receive ? "src" : "dst";
  TANDEM_CHECK((receive && peer == kAnySource) || (peer >= 0 && peer < size()), "[", backend, "] ",
               op, ": ", peer_name, " ", peer, " is out of range for ", size(), " ranks",
               receive ? " (kAnySource is -1)" : "");
  TANDEM_CHECK(peer != rank(), "[", backend, "] ", op, ": ", peer_name, " ", peer,
               " is this rank; a rank cannot ", receive ? "receive from" : "send to", " itself");
  TANDEM_CHECK(tag >= 0, "[", backend, "] ", op, ": tag ", tag, " is negative");
}

std::shared_ptr<Work> ProcessGroup::isend(Tensor tensor, int dst, int tag) {
  check_member("isend");
  check_point_to_point("isend", tensor, dst, tag, /*receive=*/false);
  return run_send(std::move(tensor), dst, tag);
}

std::shared_ptr<Work> ProcessGroup::irecv(Tensor tensor, int src, int tag) {
  check_member("irecv");
  check_point_to_point("irecv", tensor, src, tag, /*receive=*/true);
  return run_recv(std::move(tensor), src, tag);
}

std::vector<std::shared_ptr<Work>> ProcessGroup::batch_isend_irecv(std::vector<P2POp> ops) {
  const std::string op = "batch_isend_irecv";
  check_member(op);
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2POp& p2p = ops[i];
    const bool receive = p2p.kind == P2POp::Kind::Recv;
    TANDEM_CHECK(!receive || p2p.peer != kAnySource, "[", backend_name(), "] ", op, ": op ", i,
                 " receives from any source; a batch names every peer");
    check_point_to_point(detail::concat(op, " (op ", i, ", ", receive ? "irecv" : "isend", ")"),
                         p2p.tensor, p2p.peer, p2p.tag, receive);
  }
  if (ops.empty()) return {};
  return run_batch_isend_irecv(std::move(ops));
}

std::vector<std::shared_ptr<Work>> ProcessGroup::run_batch_isend_irecv(std::vector<P2POp> ops) {
  std::vector<std::shared_ptr<Work>> works;
  works.reserve(ops.size());
  for (P2POp& p2p : ops) {
    works.push_back(p2p.kind == P2POp::Kind::Send
                        ? run_send(std::move(p2p.tensor), p2p.peer, p2p.tag)
                        : run_recv(std::move(p2p.tensor), p2p.peer, p2p.tag));
  }
  return works;
}

void ProcessGroup::send(Tensor tensor, int dst, int tag) {
  isend(std::move(tensor), dst, tag)->wait();
}

int ProcessGroup::recv(Tensor tensor, int src, int tag) {
  const std::shared_ptr<Work> work = irecv(std::move(tensor), src, tag);
  work->wait();
  return work->source_rank();
}

// --- sub-groups

namespace {

// What a rank outside new_group()'s ranks gets: ProcessGroup's public operations refuse it
// before they reach a hook (check_member), so the hooks are never called.
class NonMemberGroup final : public ProcessGroup {
 public:
  NonMemberGroup(std::string backend, Device device, std::vector<int> ranks,
                 ProcessGroupOptions options)
      : ProcessGroup(NonMember{std::move(ranks)}, std::move(options)),
        backend_(std::move(backend)),
        device_(device) {}

  std::string backend_name() const override { return backend_; }
  Device tensor_device() const override { return device_; }

 protected:
  [[noreturn]] static void unreachable() {
    TANDEM_FAIL("[process_group] a non-member's group ran an operation");
  }
  std::shared_ptr<Work> run_allreduce(const std::string&, std::vector<Tensor>, ReduceOp) override {
    unreachable();
  }
  std::shared_ptr<Work> run_broadcast(const std::string&, std::vector<Tensor>, int) override {
    unreachable();
  }
  std::shared_ptr<Work> run_reduce(const std::string&, std::vector<Tensor>, int,
                                   ReduceOp) override {
    unreachable();
  }
  std::shared_ptr<Work> run_allgather(const std::string&, Tensor, Tensor) override {
    unreachable();
  }
  std::shared_ptr<Work> run_gather(const std::string&, Tensor, Tensor, int) override {
    unreachable();
  }
  std::shared_ptr<Work> run_scatter(const std::string&, Tensor, Tensor, int) override {
    unreachable();
  }
  std::shared_ptr<Work> run_reduce_scatter(const std::string&, Tensor, Tensor, ReduceOp) override {
    unreachable();
  }
  std::shared_ptr<Work> run_alltoall(const std::string&, Tensor, Tensor, std::vector<int64_t>,
                                     std::vector<int64_t>) override {
    unreachable();
  }
  std::shared_ptr<Work> run_barrier(const std::string&) override { unreachable(); }
  std::shared_ptr<Work> run_send(Tensor, int, int) override { unreachable(); }
  std::shared_ptr<Work> run_recv(Tensor, int, int) override { unreachable(); }
  std::vector<std::shared_ptr<Work>> run_batch_isend_irecv(std::vector<P2POp>) override {
    unreachable();
  }
  std::shared_ptr<ProcessGroup> make_subgroup(int, int, int, const std::vector<int>&) override {
    unreachable();
  }
  void check_placement(const std::string&, size_t, const Tensor&) const override { unreachable(); }

 private:
  const std::string backend_;
  const Device device_;
};

}  // namespace

std::shared_ptr<ProcessGroup> ProcessGroup::new_group(const std::vector<int>& ranks) {
  check_member("new_group");
  TANDEM_CHECK(!ranks.empty(), "[", backend_name(), "] new_group: no ranks");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    TANDEM_CHECK(sorted[i] >= 0 && sorted[i] < size(), "[", backend_name(), "] new_group: rank ",
                 sorted[i], " is out of range for ", size(), " ranks");
    TANDEM_CHECK(i == 0 || sorted[i] != sorted[i - 1], "[", backend_name(), "] new_group: rank ",
                 sorted[i], " is listed twice");
  }
  int index = 0;
  {
    std::lock_guard lock(subgroups_mutex_);
    index = subgroups_made_++;
  }
  const auto mine = std::find(sorted.begin(), sorted.end(), rank());
  if (mine == sorted.end()) {
    return std::make_shared<NonMemberGroup>(backend_name(), tensor_device(), std::move(sorted),
                                            options());
  }
  return make_subgroup(index, static_cast<int>(mine - sorted.begin()),
                       static_cast<int>(sorted.size()), sorted);
}

std::shared_ptr<ProcessGroup> new_group(ProcessGroup& world, const std::vector<int>& ranks) {
  return world.new_group(ranks);
}

// --- broadcast_coalesced

void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors, int root) {
  NoGradGuard no_grad;
  std::vector<DType> dtypes;  // in order of first appearance: the same on every rank
  for (const Tensor& t : tensors) {
    if (std::find(dtypes.begin(), dtypes.end(), t.dtype()) == dtypes.end()) {
      dtypes.push_back(t.dtype());
    }
  }
  for (const DType dtype : dtypes) {
    std::vector<Tensor> members, flat_parts;
    for (const Tensor& t : tensors) {
      if (t.dtype() != dtype || t.numel() == 0) continue;
      members.push_back(t);
      flat_parts.push_back(t.reshape({-1}));
    }
    if (members.empty()) continue;
    Tensor flat = cat(flat_parts);
    group.broadcast({flat}, root)->wait();
    if (group.rank() == root) continue;
    int64_t offset = 0;
    for (Tensor& t : members) {
      Tensor target = t.detach();
      target.copy_(flat.slice(offset, offset + t.numel()).view(t.shape()));
      offset += t.numel();
    }
  }
}

}  // namespace tandem::parallel
