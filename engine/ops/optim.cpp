#include "engine/ops/optim.h"

#include <string>

#include "engine/backend/backend.h"
#include "engine/ops/checks.h"
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

}  // namespace tandem
