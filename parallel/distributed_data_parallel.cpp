#include "parallel/distributed_data_parallel.h"

#include <algorithm>
#include <sstream>

#include "engine/autograd/grad_mode.h"
#include "engine/ops/factory.h"
#include "parallel/join.h"
#include "parallel/sync_batch_norm.h"
#include "parallel/zero/sharded_buckets.h"

namespace tandem::parallel {
namespace {

// A parameter list as numbers that every rank can compare: [count, then per parameter:
// requires_grad, dtype, dims, then each size]. requires_grad too, since only the parameters that
// require it are reduced: ranks that froze different ones would build different buckets.
std::vector<int64_t> describe_parameters(const nn::NamedTensors& parameters) {
  std::vector<int64_t> out{static_cast<int64_t>(parameters.size())};
  for (const auto& [name, tensor] : parameters) {
    out.push_back(tensor.requires_grad() ? 1 : 0);
    out.push_back(static_cast<int64_t>(tensor.dtype()));
    out.push_back(tensor.dim());
    for (int64_t size : tensor.shape()) out.push_back(size);
  }
  return out;
}

// Gathers every rank's vector (padded to the longest with -1), through tensors on the group's
// device (CUDA for NCCL). synchronize(): the host reads the results, and a failure must throw.
std::vector<std::vector<int64_t>> allgather_vectors(ProcessGroup& group,
                                                    const std::vector<int64_t>& mine) {
  const int n = group.size();
  const TensorOptions options{.dtype = DType::Int64, .device = group.tensor_device()};
  Tensor length = from_vector<int64_t>({static_cast<int64_t>(mine.size())}, {1}, options);
  std::vector<Tensor> lengths;
  lengths.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) lengths.push_back(zeros({1}, options));
  group.allgather(lengths, length)->synchronize();
  int64_t longest = 0;
  for (const Tensor& l : lengths) longest = std::max(longest, static_cast<int64_t>(l.item()));

  std::vector<int64_t> padded(mine);
  padded.resize(static_cast<size_t>(longest), -1);
  std::vector<Tensor> all;
  all.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) all.push_back(zeros({longest}, options));
  group.allgather(all, from_vector(padded, {longest}, options))->synchronize();
  std::vector<std::vector<int64_t>> out;
  out.reserve(all.size());
  for (const Tensor& t : all) out.push_back(t.to_vector<int64_t>());
  return out;
}

// One parameter's description, from `at` on: "float32 [4, 8]", "frozen float32 [4, 8]".
std::string shape_of(const std::vector<int64_t>& d, size_t& at) {
  const bool trained = d[at++] != 0;
  const auto dtype = static_cast<DType>(d[at++]);
  const int64_t dims = d[at++];
  Shape shape(d.begin() + static_cast<std::ptrdiff_t>(at),
              d.begin() + static_cast<std::ptrdiff_t>(at + dims));
  at += static_cast<size_t>(dims);
  return std::string(trained ? "" : "frozen ") + dtype_name(dtype) + " " + shape_str(shape);
}

// The first difference between rank 0's description and rank r's, or "".
std::string first_difference(const std::vector<int64_t>& zero, const std::vector<int64_t>& other,
                             int rank, const nn::NamedTensors& parameters) {
  if (zero[0] != other[0]) {
    return detail::concat("rank 0 has ", zero[0], " parameters, rank ", rank, " has ", other[0]);
  }
  size_t a = 1, b = 1;
  for (int64_t i = 0; i < zero[0]; ++i) {
    const std::string mine = shape_of(zero, a), theirs = shape_of(other, b);
    if (mine != theirs) {
      const std::string name = static_cast<size_t>(i) < parameters.size()
                                   ? parameters[static_cast<size_t>(i)].first
                                   : detail::concat("#", i);
      return detail::concat("parameter ", i, " (", name, ") is ", mine, " on rank 0 and ", theirs,
                            " on rank ", rank);
    }
  }
  return "";
}

}  // namespace

void verify_same_model(ProcessGroup& group, const nn::NamedTensors& parameters) {
  const auto all = allgather_vectors(group, describe_parameters(parameters));
  for (int r = 1; r < group.size(); ++r) {
    const std::string difference =
        first_difference(all[0], all[static_cast<size_t>(r)], r, parameters);
    TANDEM_CHECK(difference.empty(), "[DDP] every rank must hold the same model, but ", difference,
                 " (seen from rank ", group.rank(), ")");
  }
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<ProcessGroup> group,
                                                 DdpOptions options)
    : module_(std::move(module)), group_(std::move(group)), options_(options) {
  TANDEM_CHECK(module_ != nullptr && group_ != nullptr, "[DDP] needs a module and a process group");
  register_module("module", module_);
  const nn::NamedTensors parameters = module_->named_parameters();
  if (!parameters.empty()) check_parameters_device(*group_, parameters.front().second.device());
  verify_same_model(*group_, parameters);

  NoGradGuard no_grad;
  std::vector<Tensor> state;
  for (const auto& [name, tensor] : module_->state_dict()) state.push_back(tensor);
  broadcast_coalesced(*group_, state, 0);  // NCCL: the stream waits, not the host
  for (const auto& [name, tensor] : module_->named_buffers()) buffers_.push_back(tensor);

  std::vector<Tensor> trained;
  for (const auto& [name, tensor] : parameters) {
    if (!tensor.requires_grad()) continue;  // frozen parameters are not reduced
    trained.push_back(tensor);
    trained_names_.push_back(name);
  }
  options_.reducer = sharded_reducer_options(options_.sharding, options_.reducer);
  buckets_ = sharded_bucket_storage(options_.sharding, group_->size());
  reducer_ = std::make_unique<Reducer>(trained, trained_names_, group_, options_.reducer, buckets_);
  if (options_.sharding != Sharding::None) {
    // Note [Shards per bucket]: the Reducer's buckets as shards of this rank.
    std::vector<int64_t> numels;
    numels.reserve(trained.size());
    for (const Tensor& p : trained) numels.push_back(p.numel());
    ShardLayout layout(reducer_->bucket_assignment(), numels, group_->size(), group_->rank());
    flat_ = std::make_unique<FlatParameters>(trained, std::move(layout));
  }
}

// Note [Counted memory]
ModelStateBytes DistributedDataParallel::model_state_bytes(size_t optimizer_bytes) const {
  ModelStateBytes bytes{.optimizer = optimizer_bytes};
  for (const auto& [name, p] : module_->named_parameters()) {
    if (!flat_ || !p.requires_grad()) bytes.parameters += p.nbytes();
  }
  if (flat_) bytes.parameters += flat_->bytes();
  const GradientMemory memory = buckets_->memory();
  bytes.gradients = memory.kept_bytes + memory.peak_transient_bytes;
  // .grad tensors of their own: not views of the buckets (gradient_as_bucket_view).
  std::vector<const Storage*> bucket_storage;
  for (size_t k = 0; k < reducer_->bucket_assignment().size(); ++k) {
    const Tensor reduced = buckets_->reduced(k);
    if (reduced.defined()) bucket_storage.push_back(reduced.storage().get());
  }
  for (const auto& [name, p] : module_->named_parameters()) {
    const Tensor grad = p.grad();
    if (!grad.defined()) continue;
    if (std::find(bucket_storage.begin(), bucket_storage.end(), grad.storage().get()) !=
        bucket_storage.end()) {
      continue;
    }
    bytes.gradients += grad.nbytes();
  }
  return bytes;
}

void DistributedDataParallel::sync_buffers() {
  broadcast_coalesced(*group_, buffers_, 0);
}

namespace {

// Every rank sees the same round, so every rank throws alike.
bool round_syncs(const JoinRound& round, size_t sync_flag) {
  const int syncing = round.flags[sync_flag];
  TANDEM_CHECK(syncing == 0 || syncing == round.training_count, "[Join] in one step ", syncing,
               " of the ", round.training_count,
               " training ranks synchronise gradients and the others run under no_sync(): every "
               "rank must accumulate alike");
  return syncing > 0;
}

}  // namespace

bool DistributedDataParallel::round_synchronises(const JoinRound& round) {
  return round_syncs(round, kSyncFlag);
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  const bool reduces = autograd::grad_mode_enabled() && sync_;
  // Note [Buffer broadcast]
  bool broadcast = require_forward_param_sync_ && options_.broadcast_buffers &&
                   group_->size() > 1 && !buffers_.empty();
  int buffer_source = 0;
  if (join_ != nullptr) {
    // Note [Join protocol]: the round decides for every rank, joined ones included.
    const JoinRound round = join_->notify(*this, {reduces, broadcast});
    const bool syncs = round_syncs(round, kSyncFlag);
    if (!join_->options().divide_by_initial_world_size && syncs) {
      reducer_->set_divisor(round.training_count);
    }
    // A stop round: the joined ranks leave finish() at once, so nothing may wait for them.
    broadcast = round.flags[kBroadcastFlag] > 0 && !round.stop;
    buffer_source = round.first_training;  // the lowest rank still training
  }
  if (broadcast) broadcast_coalesced(*group_, buffers_, buffer_source);
  require_forward_param_sync_ = reduces;
  Tensor output = module_->forward(input);
  if (reduces) reducer_->prepare_for_backward({output});
  return output;
}

void DistributedDataParallel::shadow_step(const JoinRound& round) {
  const bool syncs = round_syncs(round, kSyncFlag);
  if (round.flags[kBroadcastFlag] > 0) broadcast_coalesced(*group_, buffers_, round.first_training);
  if (syncs) reducer_->shadow_backward();
  require_forward_param_sync_ = syncs;  // as on the ranks that ran the step
}

// DDP's part in a Join (parallel/joinable.h).
class DistributedDataParallel::DdpJoinHook final : public JoinHook {
 public:
  DdpJoinHook(DistributedDataParallel& ddp, Join& join) : ddp_(ddp) {
    TANDEM_CHECK(ddp_.join_ == nullptr, "[Join] this DDP model is already under a Join");
    TANDEM_CHECK(!has_sync_batchnorm(ddp_.module()),
                 "[Join] a model with SyncBatchNorm cannot join (as in PyTorch): its forward runs "
                 "collectives that a rank without data cannot answer; give every rank the same "
                 "number of batches (pad or drop the remainder)");
    ddp_.join_ = &join;
  }
  ~DdpJoinHook() override {
    if (!ddp_.join_->options().divide_by_initial_world_size) {
      ddp_.reducer().set_divisor(ddp_.process_group().size());
    }
    ddp_.join_ = nullptr;
  }
  DdpJoinHook(const DdpJoinHook&) = delete;
  DdpJoinHook& operator=(const DdpJoinHook&) = delete;

  void main_hook(const JoinRound& round) override { ddp_.shadow_step(round); }

  // Note [Join final model]: the parameters and buffers of the source rank.
  void post_hook(int source) override {
    if (source < 0) return;
    NoGradGuard no_grad;
    std::vector<Tensor> state;
    for (const auto& [name, tensor] : ddp_.module().state_dict()) state.push_back(tensor);
    broadcast_coalesced(ddp_.process_group(), state, source);
  }

 private:
  DistributedDataParallel& ddp_;
};

std::unique_ptr<JoinHook> DistributedDataParallel::join_hook(Join& join) {
  return std::make_unique<DdpJoinHook>(*this, join);
}

std::string DistributedDataParallel::describe() const {
  std::ostringstream out;
  out << "DistributedDataParallel(" << group_->backend_name() << ", rank " << group_->rank()
      << " of " << group_->size() << ")";
  return out.str();
}

std::shared_ptr<nn::Module> DistributedDataParallel::make_twin() const {
  TANDEM_FAIL(
      "[DDP] cannot clone a DistributedDataParallel module (it is tied to its process "
      "group); clone module() instead");
}

}  // namespace tandem::parallel
