#include "engine/ops/norm.h"

#include <utility>

#include "engine/autograd/node.h"
#include "engine/backend/backend.h"
#include "engine/ops/checks.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"
#include "engine/ops/layout.h"
#include "engine/ops/reduce.h"
#include "engine/profiler.h"

namespace tandem {
namespace {

using Grads = std::vector<Tensor>;
using Needs = std::vector<bool>;

void check_arguments(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                     const Tensor& running_mean, const Tensor& running_var) {
  // Note [bfloat16 activations]: x may be bfloat16; the per-channel tensors stay float32.
  ops::check_float_activation("batch_norm2d", "input", x);
  ops::check_dim("batch_norm2d", "input", x, 4);
  const Shape channels = {x.size(1)};
  const std::pair<const char*, const Tensor*> per_channel[] = {{"weight", &gamma},
                                                               {"bias", &beta},
                                                               {"running_mean", &running_mean},
                                                               {"running_var", &running_var}};
  for (const auto& [name, t] : per_channel) {
    if (!t->defined()) continue;  // all four are optional
    ops::check_dtype("batch_norm2d", name, *t, DType::Float32);
    ops::check_shape("batch_norm2d", name, *t, channels);
  }
  TANDEM_CHECK(running_mean.defined() == running_var.defined(),
               "[batch_norm2d] give both running_mean and running_var, or neither");
  ops::check_same_device("batch_norm2d", {&x, &gamma, &beta, &running_mean, &running_var});
}

Tensor training_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        const Tensor& running_mean, const Tensor& running_var,
                        const BatchNormOptions& options, const Tensor& g, const Tensor& b) {
  const int64_t count = x.size(0) * x.size(2) * x.size(3);
  TANDEM_CHECK(count > 1,
               "[batch_norm2d] training needs more than one value per channel, got input ",
               shape_str(x.shape()));
  const MemoryFormat format = x.memory_format();
  const Tensor cx = x.detach().contiguous(ops::kernel_format(x.device(), format));
  const TensorOptions on_device{.device = x.device()};
  Tensor out = empty_like(cx);
  // The batch statistics, saved for backward in the backend's own form (Note [Batch-norm
  // statistics] in engine/backend/backend.h).
  Tensor mean = empty({x.size(1)}, on_device);
  Tensor spread = empty({x.size(1)}, on_device);
  const BatchNormRunning running{running_mean, running_var, options.momentum};
  Backend& backend = backend_for(x.device());
  const bool fused = options.fuse_relu && backend.fuses_batch_norm_relu(cx);
  if (fused) {
    backend.batch_norm_relu_forward_training(cx, g, b, running, options.eps, out, mean, spread);
  } else {
    backend.batch_norm_forward_training(cx, g, b, running, options.eps, out, mean, spread);
  }
  // The fused op's backward needs its output (where the ReLU passed); a detached handle, so the
  // graph holds no cycle.
  const Tensor y = fused ? out.detach() : Tensor();
  autograd::record(
      fused ? "batch_norm2d_relu" : "batch_norm2d", {&x, &gamma, &beta}, {&out},
      [cx, y, g, mean, spread, eps = options.eps](const Grads& grads, const Needs& needs) {
        Tensor grad_x = empty_like(cx);
        Tensor grad_gamma = empty_like(g);
        Tensor grad_beta = empty_like(g);
        ops::check_same_dtype("batch_norm2d backward", "input", cx, "gradient", grads[0]);
        const Tensor grad_y = grads[0].contiguous(cx.memory_format());
        Backend& backend = backend_for(cx.device());
        if (y.defined()) {
          backend.batch_norm_relu_backward(grad_y, y, cx, g, mean, spread, eps, grad_x, grad_gamma,
                                           grad_beta);
        } else {
          backend.batch_norm_backward(grad_y, cx, g, mean, spread, eps, grad_x, grad_gamma,
                                      grad_beta);
        }
        return Grads{needs[0] ? grad_x : Tensor(), needs[1] ? grad_gamma : Tensor(),
                     needs[2] ? grad_beta : Tensor()};
      });
  out = out.contiguous(format);  // a no-op unless the backend computed on a contiguous copy
  return options.fuse_relu && !fused ? relu(out) : out;
}

Tensor inference_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& running_mean, const Tensor& running_var,
                         const BatchNormOptions& options, const Tensor& g, const Tensor& b) {
  TANDEM_CHECK(running_mean.defined(),
               "[batch_norm2d] inference needs running_mean and running_var");
  // Snapshots for backward: the module may update its running stats before this graph's
  // backward runs. Without a graph (evaluation under NoGradGuard) there is nothing to keep, and
  // two copies per batch norm saved.
  const bool graph = autograd::any_requires_grad({&x, &gamma, &beta});
  const Tensor mean = graph ? running_mean.detach().clone() : running_mean;
  const Tensor var = graph ? running_var.detach().clone() : running_var;
  const MemoryFormat format = x.memory_format();
  const Tensor cx = x.detach().contiguous(ops::kernel_format(x.device(), format));
  Tensor out = empty_like(cx);
  backend_for(x.device()).batch_norm_forward_inference(cx, g, b, mean, var, options.eps, out);
  // Rarely needed (fine-tuning with frozen statistics), so composed from elementwise ops, in
  // float32 (they take no bfloat16): a bfloat16 gradient is widened, and grad_x rounded back.
  autograd::record(
      "batch_norm2d_inference", {&x, &gamma, &beta}, {&out},
      [x = x.detach(), g, mean, var, eps = options.eps](const Grads& grads, const Needs& needs) {
        ops::check_same_dtype("batch_norm2d backward", "input", x, "gradient", grads[0]);
        const Shape per_channel = {1, x.size(1), 1, 1};
        const Tensor invstd = pow(add(var, eps), -0.5f).view(per_channel);
        const Tensor grad_y = grads[0].to(DType::Float32);
        const Tensor cx = x.to(DType::Float32);
        Tensor grad_x, grad_gamma, grad_beta;
        if (needs[0]) grad_x = mul(grad_y, mul(g.view(per_channel), invstd)).to(x.dtype());
        if (needs[1]) {
          const Tensor x_hat = mul(sub(cx, mean.view(per_channel)), invstd);
          grad_gamma = sum(mul(grad_y, x_hat), {0, 2, 3});
        }
        if (needs[2]) grad_beta = sum(grad_y, {0, 2, 3});
        return Grads{grad_x, grad_gamma, grad_beta};
      });
  return out.contiguous(format);
}

}  // namespace

Tensor batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                    const Tensor& running_mean, const Tensor& running_var,
                    const BatchNormOptions& options) {
  const profiler::RecordScope scope(options.fuse_relu ? "batch_norm2d_relu" : "batch_norm2d");
  check_arguments(x, gamma, beta, running_mean, running_var);
  const TensorOptions on_device{.device = x.device()};
  // affine=false: the kernels still take a scale and shift, so use the identity ones.
  const Tensor g = gamma.defined() ? gamma.detach().contiguous() : ones({x.size(1)}, on_device);
  const Tensor b = beta.defined() ? beta.detach().contiguous() : zeros({x.size(1)}, on_device);
  if (options.training) {
    return training_forward(x, gamma, beta, running_mean, running_var, options, g, b);
  }
  const Tensor out = inference_forward(x, gamma, beta, running_mean, running_var, options, g, b);
  return options.fuse_relu ? relu(out) : out;
}

}  // namespace tandem
