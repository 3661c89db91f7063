#include "engine/ops/optim.h"

#include <string>

#include "engine/autograd/grad_mode.h"
#include "engine/backend/backend.h"
#include "engine/ops/checks.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"
#include "engine/ops/layout.h"
#include "engine/ops/reduce.h"
#include "engine/profiler.h"

namespace tandem {
namespace {

void check_options(const char* op, const SgdStepOptions& options) {
  TANDEM_CHECK(options.lr >= 0.0f && options.momentum >= 0.0f && options.weight_decay >= 0.0f, "[",
               op, "] lr, momentum and weight_decay must be >= 0 (got ", options.lr, ", ",
               options.momentum, ", ", options.weight_decay, ")");
  TANDEM_CHECK(!options.nesterov || (options.momentum > 0.0f && options.dampening == 0.0f), "[", op,
               "] Nesterov momentum needs momentum > 0 and zero dampening");
}

// "grad" for a single parameter, "grad 3" for the fourth of a list (index >= 0).
std::string tensor_name(const char* base, int64_t index) {
  std::string name = base;
  if (index >= 0) name.append(" ").append(std::to_string(index));
  return name;
}

void check_tensors(const char* op, int64_t index, const Tensor& param, const Tensor& grad,
                   const Tensor& momentum_buffer, const SgdStepOptions& options) {
  const std::string param_name = tensor_name("param", index);
  const std::string grad_name = tensor_name("grad", index);
  const std::string buffer_name = tensor_name("momentum_buffer", index);
  ops::check_dtype(op, param_name.c_str(), param, DType::Float32);
  ops::check_shape(op, grad_name.c_str(), grad, param.shape());
  ops::check_dtype(op, grad_name.c_str(), grad, DType::Float32);
  // The kernels walk the three tensors' memory in step (Note [Memory formats]).
  const MemoryFormat format = param.memory_format();
  TANDEM_CHECK(param.is_dense() && grad.is_contiguous(format), "[", op, "] needs ", param_name,
               " and ", grad_name, " dense in one memory format (", param_name, " is ",
               memory_format_name(format), ")");
  if (options.momentum != 0.0f) {
    ops::check_shape(op, buffer_name.c_str(), momentum_buffer, param.shape());
    TANDEM_CHECK(momentum_buffer.is_contiguous(format), "[", op, "] needs ", buffer_name, " in ",
                 param_name, "'s memory format (", memory_format_name(format), ")");
  }
  ops::check_same_device(op, {&param, &grad, &momentum_buffer});
}

}  // namespace

void sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
              const SgdStepOptions& options) {
  const profiler::RecordScope scope("sgd_step");
  check_tensors("sgd_step", -1, param, grad, momentum_buffer, options);
  check_options("sgd_step", options);
  backend_for(param.device()).sgd_step(param, grad, momentum_buffer, options);
}

void sgd_step_multi(const std::vector<SgdTensors>& tensors, const SgdStepOptions& options) {
  constexpr const char* kOp = "sgd_step_multi";
  const profiler::RecordScope scope(kOp);
  check_options(kOp, options);
  if (tensors.empty()) return;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SgdTensors& t = tensors[i];
    check_tensors(kOp, static_cast<int64_t>(i), t.param, t.grad, t.momentum_buffer, options);
    TANDEM_CHECK(t.param.device() == tensors[0].param.device(), "[", kOp,
                 "] tensors on different devices: param 0 on ", tensors[0].param.device(),
                 ", param ", i, " on ", t.param.device());
  }
  backend_for(tensors[0].param.device()).sgd_step_multi(tensors, options);
}

// Note [Finding inf and NaN]: composed from ops every backend has, so that it runs on every device
// without a kernel of its own: x * 0 is 0 for a finite x and NaN for inf or NaN, so the sum of
// a gradient times 0 is NaN exactly when the gradient holds a non-finite element (the sum of the
// gradient itself would also be inf when finite elements overflow it, which PyTorch does not
// count). The sums of all gradients add up on the device into one value, NaN or 0, and
// 1 - (v == v) turns it into the flag. It reads each gradient twice and writes it once, where
// PyTorch's fused kernel reads it once; a kernel of its own is for when float16 training makes
// it hot.
void non_finite_check_and_unscale_(const std::vector<Tensor>& grads, Tensor& found_inf,
                                   float inv_scale) {
  constexpr const char* kOp = "non_finite_check_and_unscale_";
  const profiler::RecordScope scope(kOp);
  ops::check_dtype(kOp, "found_inf", found_inf, DType::Float32);
  TANDEM_CHECK(found_inf.numel() == 1 && found_inf.is_dense(), "[", kOp,
               "] found_inf must be one dense element, got ", shape_str(found_inf.shape()));
  if (grads.empty()) return;
  NoGradGuard no_grad;
  Tensor poisoned = zeros({}, {.device = found_inf.device()});  // NaN once a gradient is not finite
  for (size_t i = 0; i < grads.size(); ++i) {
    const std::string name = tensor_name("grad", static_cast<int64_t>(i));
    ops::check_dtype(kOp, name.c_str(), grads[i], DType::Float32);
    TANDEM_CHECK(grads[i].is_dense(), "[", kOp, "] ", name, " is not dense");
    ops::check_same_device(kOp, {&found_inf, &grads[i]});
    Tensor flat = ops::kernel_view(grads[i]).reshape({-1});  // its memory, in memory order
    add_(poisoned, sum(mul(flat, 0.0f)));
    if (inv_scale != 1.0f) mul_out(flat, inv_scale, flat);
  }
  Tensor found = add(neg(equal(poisoned, poisoned)), 1.0f).reshape(found_inf.shape());
  add_(found_inf, found);
}

}  // namespace tandem
