#include "tests/support/sharded_training.h"

#include <gtest/gtest.h>

#include <optional>

#include "engine/ops/loss.h"
#include "nn/checkpoint.h"
#include "parallel/sync_batch_norm.h"
#include "parallel/zero/sharded_sgd.h"
#include "tests/support/ddp_fixtures.h"
#include "tests/support/image_batch.h"
#include "tests/support/tensor_compare.h"

namespace tandem::testing {

using parallel::Sharding;

double bound_against_ddp(Sharding sharding, int world) {
  return sharding == Sharding::Optimizer || world == 2 ? 0.0 : kReductionOrderBound;
}

parallel::DdpOptions sharded_options(Sharding sharding, bool rebuild_buckets) {
  parallel::DdpOptions options{.reducer = {.first_bucket_mb = 0.001,
                                           .bucket_cap_mb = 0.002,
                                           .rebuild_buckets = rebuild_buckets},
                               .sharding = sharding};
  if (sharding == Sharding::Parameters)
    options.units = {{"0", "1", "2"}, {"3", "4", "5"}, {"6", "7", "8"}};
  return options;
}

namespace {

void run_steps(parallel::DistributedDataParallel& model, nn::Optimizer& optimizer, int rank,
               int steps, int micro) {
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    for (int m = 0; m < micro; ++m) {
      std::optional<parallel::DistributedDataParallel::NoSyncGuard> no_sync;
      if (m + 1 < micro) no_sync.emplace(model);
      const auto batch = random_image_batch(kShardedRows, 1000 + 100 * static_cast<uint64_t>(step) +
                                                              10 * static_cast<uint64_t>(m) +
                                                              static_cast<uint64_t>(rank));
      mul(cross_entropy(model.forward(batch.images), batch.labels),
          1.0f / static_cast<float>(micro))
          .backward();
    }
    optimizer.step();
  }
}

}  // namespace

namespace {

// What `model` holds after its steps; on rank 0 the whole momentum, `full`.
Trained collect(parallel::DistributedDataParallel& model, const nn::Optimizer& optimizer,
                const nn::Sgd* full) {
  Trained out;
  out.optimizer_bytes = optimizer.state_bytes();
  out.bytes = model.model_state_bytes(out.optimizer_bytes);
  {
    const parallel::GatheredParameters whole = model.gather_parameters();  // stage 3's weights
    for (const Tensor& p : model.module().parameters()) {
      out.weights.push_back(p.detach().clone());
      out.grads_left = out.grads_left || p.grad().defined();
    }
  }
  out.buckets = model.reducer().bucket_assignment();
  if (full != nullptr) {
    for (const Tensor& buffer : full->momentum_buffers()) out.momentum.push_back(buffer);
  }
  if (model.flat_parameters() != nullptr) {
    out.shard_numel = model.flat_parameters()->layout().shard_numel();
    out.padded_numel = model.flat_parameters()->layout().padded_numel();
  }
  return out;
}

}  // namespace

Trained train_sharded(const std::shared_ptr<parallel::ProcessGroup>& group, Sharding sharding,
                      const nn::SgdConfig& config, int steps, int micro, Variant variant) {
  auto net = conv_bn_net(7);
  net->set_precision(variant.precision);
  if (variant.sync_bn) parallel::convert_sync_batchnorm(*net, group);
  nn::Sgd sgd(net->parameters(), config);
  if (!variant.load_from.empty()) nn::load_checkpoint(variant.load_from, *net, sgd);
  parallel::DistributedDataParallel model(net, group,
                                          sharded_options(sharding, variant.rebuild_buckets));
  if (variant.compression != parallel::GradCompression::None) {
    model.register_comm_hook(parallel::make_comm_hook(variant.compression));
  }
  std::unique_ptr<parallel::ShardedSgd> sharded;
  if (sharding != Sharding::None) sharded = std::make_unique<parallel::ShardedSgd>(model, sgd);
  nn::Optimizer& optimizer = sharded ? static_cast<nn::Optimizer&>(*sharded) : sgd;
  run_steps(model, optimizer, group->rank(), steps, micro);
  // A collective: every rank takes part, rank 0 gets the whole momentum.
  std::unique_ptr<nn::Sgd> whole = sharded ? sharded->consolidated(0) : nullptr;
  const nn::Sgd* full = group->rank() != 0 ? nullptr : sharded ? whole.get() : &sgd;
  if (!variant.save_to.empty()) {
    const parallel::GatheredParameters gathered = model.gather_parameters();
    if (full != nullptr) nn::save_checkpoint(variant.save_to, *net, *full, {});
  }
  return collect(model, optimizer, full);
}

Trained read_checkpoint(const std::string& path) {
  auto net = conv_bn_net(1);
  nn::Sgd sgd(net->parameters(), {.momentum = 0.9f});
  nn::load_checkpoint(path, *net, sgd);
  Trained out;
  for (const Tensor& p : net->parameters()) out.weights.push_back(p);
  for (const Tensor& buffer : sgd.momentum_buffers()) out.momentum.push_back(buffer);
  return out;
}

void expect_like_ddp(const Trained& actual, const Trained& expected, double relative,
                     const std::string& what) {
  ASSERT_EQ(actual.weights.size(), expected.weights.size());
  for (size_t i = 0; i < expected.weights.size(); ++i) {
    expect_close_to_reference(actual.weights[i], expected.weights[i],
                              what + " weight " + std::to_string(i), relative);
  }
  ASSERT_EQ(actual.momentum.size(), expected.momentum.size()) << what;
  for (size_t i = 0; i < expected.momentum.size(); ++i) {
    ASSERT_EQ(actual.momentum[i].defined(), expected.momentum[i].defined()) << what << " " << i;
    if (!expected.momentum[i].defined()) continue;
    expect_close_to_reference(actual.momentum[i], expected.momentum[i],
                              what + " momentum " + std::to_string(i), relative);
  }
}

void expect_stages_like_ddp(const std::shared_ptr<parallel::ProcessGroup>& group,
                            const std::vector<Sharding>& shardings) {
  struct Case {
    nn::SgdConfig config;
    int micro;
    std::string name;
  };
  const std::vector<Case> cases = {
      {{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f}, 1, "momentum + weight decay"},
      {{.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f, .nesterov = true},
       2,
       "Nesterov, 2 micro-batches"},
      {{.lr = 0.05f, .weight_decay = 1e-3f, .no_decay_for_bn_and_bias = true},
       3,
       "no momentum, no decay for 1-D, 3 micro-batches"},
  };
  for (const Case& c : cases) {
    const Trained ddp = train_sharded(group, Sharding::None, c.config, 3, c.micro);
    for (const Sharding sharding : shardings) {
      const Trained zero = train_sharded(group, sharding, c.config, 3, c.micro);
      expect_like_ddp(zero, ddp, bound_against_ddp(sharding, group->size()),
                      std::string(parallel::sharding_name(sharding)) + ", " + c.name);
    }
  }
}

}  // namespace tandem::testing
