// PLACEHOLDER: oneDNN batch norm arrives in the next commit.
#include "engine/cpu/cpu_backend.h"
namespace tandem::cpu {
void CpuBackend::batch_norm_forward_training(const Tensor&, const Tensor&, const Tensor&, float, Tensor&, Tensor&, Tensor&) { TANDEM_FAIL("[batch_norm2d] not implemented yet"); }
void CpuBackend::batch_norm_forward_inference(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, float, Tensor&) { TANDEM_FAIL("[batch_norm2d] not implemented yet"); }
void CpuBackend::batch_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, float, Tensor&, Tensor&, Tensor&) { TANDEM_FAIL("[batch_norm2d] not implemented yet"); }
}  // namespace tandem::cpu
