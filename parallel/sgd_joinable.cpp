#include "parallel/sgd_joinable.h"

#include <string>

#include "engine/autograd/grad_mode.h"
#include "engine/ops/factory.h"

namespace tandem::parallel {
namespace {

class SgdJoinHook final : public JoinHook {
 public:
  SgdJoinHook(nn::Sgd& optimizer, ProcessGroup& group) : optimizer_(optimizer), group_(group) {}

  void post_hook(int source) override {
    if (source < 0) return;
    broadcast_optimizer_state(group_, optimizer_.mutable_momentum_buffers(),
                              optimizer_.parameters(), source);
  }

 private:
  nn::Sgd& optimizer_;
  ProcessGroup& group_;
};

// `values` from `root` to every rank, through a tensor on the group's device; every rank
// passes as many.
std::vector<int64_t> broadcast_numbers(ProcessGroup& group, const std::vector<int64_t>& values,
                                       int root) {
  const TensorOptions options{.dtype = DType::Int64, .device = group.tensor_device()};
  Tensor tensor = from_vector(values, {static_cast<int64_t>(values.size())}, options);
  group.broadcast({tensor}, root)->synchronize();  // the host reads it next
  return tensor.to_vector<int64_t>();
}

// Why this rank's tensor i cannot take the source's, or "".
std::string mismatch(const std::vector<Tensor>& state, const std::vector<Tensor>& like, size_t i,
                     int64_t numel, int64_t dtype) {
  const Tensor& mine = state[i].defined() ? state[i] : i < like.size() ? like[i] : Tensor();
  if (!mine.defined()) return detail::concat("tensor ", i, " is undefined here and has no model");
  if (mine.numel() != numel || static_cast<int64_t>(mine.dtype()) != dtype) {
    return detail::concat("tensor ", i, " is ", dtype_name(mine.dtype()), " ",
                          shape_str(mine.shape()), " here, with ", numel, " elements of ",
                          dtype_name(static_cast<DType>(dtype)), " on the source");
  }
  return "";
}

}  // namespace

std::unique_ptr<JoinHook> SgdJoinable::join_hook(Join& /*join*/) {
  return std::make_unique<SgdJoinHook>(optimizer_, group_);
}

// Note [Undefined optimizer state]
void broadcast_optimizer_state(ProcessGroup& group, std::vector<Tensor>& state,
                               const std::vector<Tensor>& like, int source) {
  NoGradGuard no_grad;
  const bool is_source = group.rank() == source;
  const auto count = static_cast<size_t>(
      broadcast_numbers(group, {static_cast<int64_t>(state.size())}, source).front());
  // Per tensor of the source: [defined, numel, dtype].
  std::vector<int64_t> described(3 * count, 0);
  for (size_t i = 0; is_source && i < count; ++i) {
    if (!state[i].defined()) continue;
    described[3 * i] = 1;
    described[3 * i + 1] = state[i].numel();
    described[3 * i + 2] = static_cast<int64_t>(state[i].dtype());
  }
  described = broadcast_numbers(group, described, source);

  std::string problem = count == state.size() ? ""
                                              : detail::concat(state.size(), " tensors here, ",
                                                               count, " on the source");
  for (size_t i = 0; problem.empty() && i < count; ++i) {
    if (described[3 * i] != 0)
      problem = mismatch(state, like, i, described[3 * i + 1], described[3 * i + 2]);
  }
  // Every rank learns which ranks cannot take the source's state, so all throw alike.
  const int world = group.size();
  std::vector<float> failed(static_cast<size_t>(world), 0.0f);
  failed[static_cast<size_t>(group.rank())] = problem.empty() ? 0.0f : 1.0f;
  Tensor failed_tensor = from_vector(failed, {world}).to(group.tensor_device());
  group.allreduce({failed_tensor}, ReduceOp::Sum)->synchronize();
  const std::vector<float> all_failed = failed_tensor.to_vector<float>();
  std::string ranks;
  for (int r = 0; r < world; ++r) {
    if (all_failed[static_cast<size_t>(r)] > 0)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  }
  TANDEM_CHECK(ranks.empty(), "[Join] the optimizer state to equalise differs from rank ", source,
               "'s on rank(s) ", ranks, problem.empty() ? "" : ": " + problem);

  std::vector<Tensor> sent;
  for (size_t i = 0; i < count; ++i) {
    if (described[3 * i] == 0) continue;  // the source has none: each rank keeps its own
    if (!state[i].defined()) state[i] = empty_like(like[i]);
    sent.push_back(state[i]);
  }
  broadcast_coalesced(group, sent, source);
}

}  // namespace tandem::parallel
