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

// The training forward's backward. y: the fused op's output (undefined: batch norm alone);
// with_residual: the fused op added a residual, whose gradient is its fourth.
autograd::BackwardFunction training_backward(const Tensor& cx, const Tensor& y, const Tensor& g,
                                             const Tensor& mean, const Tensor& spread, float eps,
                                             bool with_residual) {
  return [cx, y, g, mean, spread, eps, with_residual](const Grads& grads, const Needs& needs) {
    Tensor grad_x = empty_like(cx);
    Tensor grad_gamma = empty_like(g);
    Tensor grad_beta = empty_like(g);
    // Computed whenever the residual was added, needed or not: the CPU kernel's grad_x pass reads
    // it (Note [Channels-last batch norm]).
    Tensor grad_residual = with_residual ? empty_like(cx) : Tensor();
    ops::check_same_dtype("batch_norm2d backward", "input", cx, "gradient", grads[0]);
    const Tensor grad_y = grads[0].contiguous(cx.memory_format());
    Backend& backend = backend_for(cx.device());
    if (y.defined()) {
      backend.batch_norm_relu_backward(grad_y, y, cx, g, mean, spread, eps, grad_x, grad_gamma,
                                       grad_beta, grad_residual);
    } else {
      backend.batch_norm_backward(grad_y, cx, g, mean, spread, eps, grad_x, grad_gamma, grad_beta);
    }
    return Grads{needs[0] ? grad_x : Tensor(), needs[1] ? grad_gamma : Tensor(),
                 needs[2] ? grad_beta : Tensor(), needs[3] ? grad_residual : Tensor()};
  };
}

const char* training_op_name(bool fused, bool with_residual) {
  if (!fused) return "batch_norm2d";
  return with_residual ? "batch_norm2d_add_relu" : "batch_norm2d_relu";
}

// residual, when defined: relu(batch_norm(x) + residual), fused where the backend can, else
// batch norm then add_relu.
Tensor training_forward(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                        const Tensor& beta, const Tensor& running_mean, const Tensor& running_var,
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
  const bool with_relu = options.fuse_relu || residual.defined();
  const bool fused = with_relu && backend.fuses_batch_norm_relu(cx);
  const bool fused_residual = fused && residual.defined();
  if (fused) {
    const Tensor add = fused_residual ? residual.detach().contiguous(cx.memory_format()) : Tensor();
    backend.batch_norm_relu_forward_training(cx, add, g, b, running, options.eps, out, mean,
                                             spread);
  } else {
    backend.batch_norm_forward_training(cx, g, b, running, options.eps, out, mean, spread);
  }
  // The fused op's backward needs its output (where the ReLU passed); a detached handle, so the
  // graph holds no cycle.
  const Tensor y = fused ? out.detach() : Tensor();
  autograd::record(training_op_name(fused, fused_residual),
                   {&x, &gamma, &beta, fused_residual ? &residual : nullptr}, {&out},
                   training_backward(cx, y, g, mean, spread, options.eps, fused_residual));
  out = out.contiguous(format);  // a no-op unless the backend computed on a contiguous copy
  if (fused) return out;
  if (residual.defined()) return add_relu(out, residual);
  return options.fuse_relu ? relu(out) : out;
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

// residual: as training_forward's.
Tensor normalize(const Tensor& x, const Tensor& residual, const Tensor& gamma, const Tensor& beta,
                 const Tensor& running_mean, const Tensor& running_var,
                 const BatchNormOptions& options) {
  check_arguments(x, gamma, beta, running_mean, running_var);
  const TensorOptions on_device{.device = x.device()};
  // affine=false: the kernels still take a scale and shift, so use the identity ones.
  const Tensor g = gamma.defined() ? gamma.detach().contiguous() : ones({x.size(1)}, on_device);
  const Tensor b = beta.defined() ? beta.detach().contiguous() : zeros({x.size(1)}, on_device);
  if (options.training) {
    return training_forward(x, residual, gamma, beta, running_mean, running_var, options, g, b);
  }
  // Evaluation composes: one extra pass, off the training path.
  const Tensor out = inference_forward(x, gamma, beta, running_mean, running_var, options, g, b);
  if (residual.defined()) return add_relu(out, residual);
  return options.fuse_relu ? relu(out) : out;
}

}  // namespace

Tensor batch_norm2d(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                    const Tensor& running_mean, const Tensor& running_var,
                    const BatchNormOptions& options) {
  const profiler::RecordScope scope(options.fuse_relu ? "batch_norm2d_relu" : "batch_norm2d");
  return normalize(x, Tensor(), gamma, beta, running_mean, running_var, options);
}

Tensor batch_norm2d_add_relu(const Tensor& x, const Tensor& residual, const Tensor& gamma,
                             const Tensor& beta, const Tensor& running_mean,
                             const Tensor& running_var, const BatchNormOptions& options) {
  const profiler::RecordScope scope("batch_norm2d_add_relu");
  TANDEM_CHECK(residual.defined(), "[batch_norm2d_add_relu] needs a residual");
  ops::check_same_dtype("batch_norm2d_add_relu", "input", x, "residual", residual);
  ops::check_shape("batch_norm2d_add_relu", "residual", residual, x.shape());
  ops::check_same_device("batch_norm2d_add_relu", {&x, &residual});
  return normalize(x, residual, gamma, beta, running_mean, running_var, options);
}

}  // namespace tandem
