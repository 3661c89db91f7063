#include "parallel/zero/sharded_sgd.h"

#include <algorithm>

#include "engine/autograd/grad_mode.h"
#include "engine/ops/factory.h"
#include "engine/ops/layout.h"
#include "engine/ops/optim.h"
#include "parallel/join.h"

namespace tandem::parallel {
namespace {

const FlatParameters& flat_of(const DistributedDataParallel& ddp) {
  TANDEM_CHECK(ddp.flat_parameters() != nullptr,
               "[ZeRO] ShardedSgd needs a DistributedDataParallel built with sharding "
               "(DdpOptions::sharding = Sharding::Optimizer or Sharding::Gradients)");
  return *ddp.flat_parameters();
}

// A dense tensor's elements in memory order, as one 1-D view.
Tensor memory_order(const Tensor& t) {
  return ops::kernel_view(t).reshape({-1});
}

}  // namespace

ShardedSgd::ShardedSgd(DistributedDataParallel& ddp, nn::Sgd& full)
    : ddp_(ddp), flat_(flat_of(ddp)), buckets_(ddp.bucket_storage()), config_(full.config()) {
  const ShardLayout& layout = flat_.layout();
  has_momentum_.assign(layout.parameter_count(), false);
  if (config_.momentum != 0.0f) {
    for (const BucketShards& bucket : layout.buckets()) {
      momentum_.push_back(
          zeros({bucket.shard_numel}, {.device = ddp.process_group().tensor_device()}));
    }
  }
  take_state(full);
}

// Note [Sharded data parallel], checkpoints (Note [One checkpoint format]): the state is the same
// as plain SGD's, whatever the world size and stage. consolidated() gathers the parts on one rank
// into an nn::Sgd over the module's parameters, which nn::save_checkpoint() writes as it writes
// plain DDP's; and a ShardedSgd is built from an nn::Sgd holding the whole state (none, or what
// nn::load_checkpoint() loaded on every rank), of which it keeps its part and drops the rest.
// Resuming at another world size or stage is therefore the ordinary load, then this
// constructor: the one place that maps a whole state to a rank's part.
// Here: a whole state in, this rank's parts kept.
void ShardedSgd::take_state(nn::Sgd& full) {
  NoGradGuard no_grad;
  module_parameters_ = full.parameters();
  const std::vector<Tensor>& trained = flat_.parameters();
  std::vector<Tensor> whole(trained.size());
  for (size_t i = 0; i < trained.size(); ++i) {
    const auto found = std::find_if(module_parameters_.begin(), module_parameters_.end(),
                                    [&](const Tensor& p) { return p.is_same(trained[i]); });
    TANDEM_CHECK(found != module_parameters_.end(), "[ZeRO] parameter ", ddp_.trained_names().at(i),
                 " of the DDP model is not among the optimizer's: build the nn::Sgd over "
                 "module().parameters()");
    const Tensor& buffer =
        full.momentum_buffers()[static_cast<size_t>(found - module_parameters_.begin())];
    if (!buffer.defined() || config_.momentum == 0.0f) continue;
    whole[i] = memory_order(buffer.contiguous(trained[i].memory_format()));
    has_momentum_[i] = true;
  }
  for (size_t k = 0; k < momentum_.size(); ++k) {
    for (const ShardSegment& s : flat_.layout().buckets()[k].segments) {
      if (!whole[s.parameter].defined()) continue;
      momentum_[k]
          .slice(s.shard_offset, s.shard_offset + s.length)
          .copy_(whole[s.parameter].slice(s.parameter_offset, s.parameter_offset + s.length));
    }
  }
  for (Tensor& buffer : full.mutable_momentum_buffers()) buffer = Tensor();  // ours now
}

void ShardedSgd::set_lr(float lr) {
  TANDEM_CHECK(lr >= 0.0f, "[SGD] learning rate must be >= 0, got ", lr);
  config_.lr = lr;
}

size_t ShardedSgd::state_bytes() const {
  size_t bytes = 0;
  for (const Tensor& part : momentum_) bytes += part.nbytes();
  return bytes;
}

void ShardedSgd::zero_grad() {
  for (const Tensor& p : module_parameters_) p.set_grad(Tensor());
  buckets_.clear_reduced();
}

void ShardedSgd::step() {
  if (!buckets_.has_reduced()) return;
  if (join_ != nullptr) config_.lr = agree_lr(/*joined=*/false);
  step_parts();
}

std::vector<Tensor> ShardedSgd::gradients() const {
  std::vector<Tensor> parts;
  if (!buckets_.has_reduced()) return parts;
  for (size_t k = 0; k < flat_.layout().buckets().size(); ++k) {
    const Tensor grads = buckets_.reduced(k);
    const int64_t begin = reduced_part_begin(k);
    for (const ShardSegment& s : flat_.layout().buckets()[k].segments) {
      parts.push_back(grads.slice(begin + s.shard_offset, begin + s.shard_offset + s.length));
    }
  }
  return parts;
}

int64_t ShardedSgd::reduced_part_begin(size_t k) const {
  // Stage 2's reduction is this rank's part already; stage 1's is the whole bucket.
  return ddp_.sharding() == Sharding::Gradients ? 0 : flat_.layout().buckets()[k].shard_begin;
}

float ShardedSgd::agree_lr(bool joined) {
  ProcessGroup& group = ddp_.process_group();
  Tensor lr =
      from_vector<float>({joined ? 0.0f : config_.lr}, {1}, {.device = group.tensor_device()});
  group.allreduce({lr}, ReduceOp::Max)->synchronize();  // the host reads it next
  return static_cast<float>(lr.item());
}

// Each bucket's all-gather starts as soon as its part is stepped, so it travels while the next
// part is stepped; on NCCL, wait() only orders the current stream after them.
void ShardedSgd::step_parts() {
  flat_.check_bound(ddp_.trained_names());
  NoGradGuard no_grad;
  ProcessGroup& group = ddp_.process_group();
  const size_t buckets = flat_.layout().buckets().size();
  std::vector<std::shared_ptr<Work>> gathers;
  for (size_t k = 0; k < buckets; ++k) {
    step_bucket(k);
    gathers.push_back(flat_.allgather(group, k));
  }
  for (size_t k = 0; k < buckets; ++k) {
    try {
      gathers[k]->wait();
    } catch (const Error& e) {
      TANDEM_FAIL("[ZeRO] all-gather of parameter bucket ", k, " failed: ", e.message());
    }
  }
  if (config_.momentum != 0.0f) std::fill(has_momentum_.begin(), has_momentum_.end(), true);
}

// This rank's part of bucket k: its segments, merged where they share the step's options, so
// that a part without 1-D parameters under no_decay_for_bn_and_bias is one update.
void ShardedSgd::step_bucket(size_t k) {
  const BucketShards& bucket = flat_.layout().buckets()[k];
  const Tensor params = flat_.shard(k);
  const Tensor grads = buckets_.reduced(k);
  const int64_t grad_begin = reduced_part_begin(k);
  const auto options_of = [&](size_t parameter) {
    return nn::step_options(config_, flat_.parameters()[parameter], !has_momentum_[parameter]);
  };
  std::vector<std::pair<SgdStepOptions, std::vector<SgdTensors>>> groups;
  const std::vector<ShardSegment>& segments = bucket.segments;
  for (size_t j = 0; j < segments.size();) {
    const SgdStepOptions options = options_of(segments[j].parameter);
    const int64_t begin = segments[j].shard_offset;
    int64_t end = begin;
    for (; j < segments.size() && nn::same_step(options_of(segments[j].parameter), options); ++j) {
      end += segments[j].length;
    }
    SgdTensors run{params.slice(begin, end), grads.slice(grad_begin + begin, grad_begin + end),
                   momentum_.empty() ? Tensor() : momentum_[k].slice(begin, end)};
    auto group = std::find_if(groups.begin(), groups.end(),
                              [&](const auto& g) { return nn::same_step(g.first, options); });
    if (group == groups.end()) {
      groups.emplace_back(options, std::vector<SgdTensors>{});
      group = groups.end() - 1;
    }
    group->second.push_back(std::move(run));
  }
  for (const auto& [options, tensors] : groups) sgd_step_multi(tensors, options);
}

std::unique_ptr<nn::Sgd> ShardedSgd::consolidated(int root) {
  ProcessGroup& group = ddp_.process_group();
  const bool is_root = group.rank() == root;
  auto full = is_root ? std::make_unique<nn::Sgd>(module_parameters_, config_) : nullptr;
  if (momentum_.empty()) return full;
  NoGradGuard no_grad;
  const ShardLayout& layout = flat_.layout();
  const std::vector<Tensor>& trained = flat_.parameters();
  for (size_t k = 0; k < momentum_.size(); ++k) {
    const BucketShards& bucket = layout.buckets()[k];
    Tensor whole;
    std::vector<Tensor> parts;
    if (is_root) {
      whole = empty({bucket.padded_numel}, {.device = group.tensor_device()});
      for (int r = 0; r < layout.world(); ++r) {
        parts.push_back(whole.slice(r * bucket.shard_numel, (r + 1) * bucket.shard_numel));
      }
    }
    group.gather(parts, momentum_[k], root)->wait();
    if (!is_root) continue;
    for (size_t slot = 0; slot < bucket.parameters.size(); ++slot) {
      const size_t i = bucket.parameters[slot];
      if (!has_momentum_[i]) continue;
      Tensor buffer = empty_like(trained[i]);
      memory_order(buffer).copy_(
          whole.slice(bucket.offsets[slot], bucket.offsets[slot] + trained[i].numel()));
      const auto at = std::find_if(module_parameters_.begin(), module_parameters_.end(),
                                   [&](const Tensor& p) { return p.is_same(trained[i]); });
      full->mutable_momentum_buffers()[static_cast<size_t>(at - module_parameters_.begin())] =
          buffer;
    }
  }
  return full;
}

// Note [Sharded data parallel], Join (uneven inputs; parallel/join.h): ShardedSgd is a Joinable.
// Give the Join the DDP model first, then the ShardedSgd. Every rank owns a part of the model, so a
// rank that has joined must go on stepping its part: in each round that synchronises gradients its
// hook steps the part from the shadowed reduction (Note [Joined ranks] in reducer.cpp) and joins
// the all-gathers. The training ranks' step() first agrees on the learning rate (an all-reduce of
// it, the largest wins), since a joined rank's schedule stopped. PyTorch's
// ZeroRedundancyOptimizer also steps on joined ranks, with their own learning rate. Under a
// Join, every synchronised backward must be followed by one step() (a step the joined ranks
// cannot see would leave their collectives a step behind: the consistency check then fails).
class ShardedSgd::JoinHookImpl final : public JoinHook {
 public:
  JoinHookImpl(ShardedSgd& sgd, Join& join) : sgd_(sgd) {
    TANDEM_CHECK(sgd_.join_ == nullptr, "[Join] this ShardedSgd is already under a Join");
    sgd_.join_ = &join;
  }
  ~JoinHookImpl() override { sgd_.join_ = nullptr; }
  JoinHookImpl(const JoinHookImpl&) = delete;
  JoinHookImpl& operator=(const JoinHookImpl&) = delete;

  void main_hook(const JoinRound& round) override {
    if (!DistributedDataParallel::round_synchronises(round)) return;
    sgd_.config_.lr = sgd_.agree_lr(/*joined=*/true);
    sgd_.step_parts();
  }

 private:
  ShardedSgd& sgd_;
};

std::unique_ptr<JoinHook> ShardedSgd::join_hook(Join& join) {
  return std::make_unique<JoinHookImpl>(*this, join);
}

}  // namespace tandem::parallel
