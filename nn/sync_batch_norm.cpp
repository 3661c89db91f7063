#include "nn/sync_batch_norm.h"

#include <algorithm>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/ops/concat.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"
#include "engine/ops/reduce.h"

namespace tandem::nn {
namespace {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

Tensor per_channel(const Tensor& values) {  // (C) -> (1, C, 1, 1), to broadcast over x
  return values.view({1, values.size(0), 1, 1});
}

// The (C) tensors `parts` summed over ranks in one collective: [part 0, part 1, ..., extra].
std::vector<Tensor> sum_over_ranks(const std::vector<Tensor>& parts, StatisticsReducer& reducer) {
  Tensor packed = cat(parts);
  reducer.sum_over_ranks(packed);
  std::vector<Tensor> out;
  int64_t offset = 0;
  for (const Tensor& part : parts) {
    out.push_back(packed.slice(offset, offset + part.size(0)));
    offset += part.size(0);
  }
  return out;
}

// This rank's per-channel mean and biased variance of x (N, C, H, W), `values` per channel: two
// passes, so a large mean does not cancel. An empty share gives zeros, which its count of 0 then
// weighs out.
struct Moments {
  Tensor mean, var;
};
Moments local_moments(const Tensor& x, int64_t values) {
  const float inverse = 1.0f / static_cast<float>(std::max<int64_t>(values, 1));
  const Tensor mean = mul(sum(x, {0, 2, 3}), inverse);
  const Tensor centred = sub(x, per_channel(mean));
  return {mean, mul(sum(mul(centred, centred), {0, 2, 3}), inverse)};
}

// Every rank's [mean; variance; count] in one collective (Note [Synchronised batch norm]):
// (3, ranks, C), this rank's own in row `rank` of each of the three blocks.
Tensor exchange_moments(const Moments& local, int64_t values, StatisticsReducer& reducer) {
  const int64_t ranks = reducer.size(), channels = local.mean.size(0), rank = reducer.rank();
  Tensor all = zeros({3, ranks, channels}, {.device = local.mean.device()});
  const auto own = [&](int64_t quantity) {
    return all.slice(quantity, quantity + 1)
        .view({ranks, channels})
        .slice(rank, rank + 1)
        .view({channels});
  };
  own(0).copy_(local.mean);
  own(1).copy_(local.var);
  own(2).fill_(static_cast<double>(values));
  reducer.sum_over_ranks(all);
  return all;
}

// The global statistics from every rank's (Chan et al.'s parallel variance), all (C): the count
// is the same in every channel.
struct GlobalMoments {
  Tensor mean, var, count;
};
GlobalMoments combine(const Tensor& all) {
  const int64_t ranks = all.size(1), channels = all.size(2);
  const auto block = [&](int64_t quantity) {
    return all.slice(quantity, quantity + 1).view({ranks, channels});
  };
  const Tensor means = block(0), vars = block(1), counts = block(2);
  GlobalMoments global;
  global.count = sum(counts, {0});
  const Tensor weights = div(counts, global.count.view({1, channels}));  // n_r / n
  global.mean = sum(mul(weights, means), {0});
  const Tensor deviation = sub(means, global.mean.view({1, channels}));
  global.var = sum(mul(weights, add(vars, mul(deviation, deviation))), {0});
  return global;
}

// The running statistics move towards this step's global mean and unbiased variance.
void update_running_statistics(const Tensor& running_mean, const Tensor& running_var,
                               const Tensor& mean, const Tensor& var, const Tensor& count,
                               float momentum) {
  Tensor running = running_mean;
  running.copy_(add(mul(running_mean, 1.0f - momentum), mul(mean, momentum)));
  Tensor running_v = running_var;
  const Tensor unbiased = mul(var, div(count, add(count, -1.0f)));  // count / (count - 1)
  running_v.copy_(add(mul(running_var, 1.0f - momentum), mul(unbiased, momentum)));
}

}  // namespace

Tensor sync_batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& running_mean, const Tensor& running_var,
                         const BatchNormOptions& options,
                         const std::shared_ptr<StatisticsReducer>& reducer) {
  TANDEM_CHECK(reducer != nullptr, "[sync_batch_norm2d] no statistics reducer");
  TANDEM_CHECK(x.dim() == 4 && options.training,
               "[sync_batch_norm2d] needs a 4-D input in training mode, got ",
               shape_str(x.shape()));
  const int64_t channels = x.size(1);
  const int64_t local_values = x.size(0) * x.size(2) * x.size(3);
  // The global count is known only on the device (Note [Synchronised batch norm]), so this is
  // batch norm's own check on this rank's input; an empty share is fine, the others fill it.
  TANDEM_CHECK(local_values != 1,
               "[sync_batch_norm2d] training needs more than one value per channel, got input ",
               shape_str(x.shape()));
  const TensorOptions on_device{.device = x.device()};
  Tensor out, invstd, x_hat, inverse_count;
  {
    NoGradGuard no_grad;
    const Tensor cx = x.detach();
    // Note [Synchronised batch norm]: this rank's moments, then every rank's in one collective.
    const GlobalMoments global =
        combine(exchange_moments(local_moments(cx, local_values), local_values, *reducer));
    inverse_count = div(ones({channels}, on_device), global.count);
    invstd = pow(add(global.var, options.eps), -0.5f);
    x_hat = mul(sub(cx, per_channel(global.mean)), per_channel(invstd));
    const Tensor g = gamma.defined() ? gamma.detach() : ones({channels}, on_device);
    const Tensor b = beta.defined() ? beta.detach() : zeros({channels}, on_device);
    out = add(mul(x_hat, per_channel(g)), per_channel(b)).contiguous(x.memory_format());
    if (running_mean.defined()) {
      update_running_statistics(running_mean, running_var, global.mean, global.var, global.count,
                                options.momentum);
    }
  }
  const Tensor g = gamma.defined() ? gamma.detach() : ones({channels}, on_device);
  autograd::record(
      "sync_batch_norm2d", {&x, &gamma, &beta}, {&out},
      [x_hat, invstd, g, inverse_count, reducer](const Grads& grads, const Needs& needs) {
        const Tensor& grad_y = grads[0];
        const Tensor sum_dy = sum(grad_y, {0, 2, 3});
        const Tensor sum_dy_x_hat = sum(mul(grad_y, x_hat), {0, 2, 3});
        Tensor grad_x;
        if (needs[0]) {
          const auto global = sum_over_ranks({sum_dy, sum_dy_x_hat}, *reducer);
          // grad_x = gamma * invstd * (grad_y - mean(grad_y) - x_hat * mean(grad_y * x_hat)),
          // means over every rank's values.
          const Tensor centred_grad = sub(sub(grad_y, per_channel(mul(global[0], inverse_count))),
                                          mul(x_hat, per_channel(mul(global[1], inverse_count))));
          grad_x =
              mul(centred_grad, per_channel(mul(g, invstd))).contiguous(grad_y.memory_format());
        }
        return Grads{grad_x, needs[1] ? sum_dy_x_hat : Tensor(), needs[2] ? sum_dy : Tensor()};
      });
  return options.fuse_relu ? relu(out) : out;
}

}  // namespace tandem::nn
