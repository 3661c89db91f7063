// PLACEHOLDER: oneDNN convolution arrives in the next commit.
#include "engine/cpu/cpu_backend.h"
namespace tandem::cpu {
void CpuBackend::conv2d_forward(const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&, Tensor&) { TANDEM_FAIL("[conv2d] not implemented yet"); }
void CpuBackend::conv2d_backward_input(const Tensor&, const Tensor&, const Conv2dOptions&, Tensor&) { TANDEM_FAIL("[conv2d] not implemented yet"); }
void CpuBackend::conv2d_backward_weight(const Tensor&, const Tensor&, const Conv2dOptions&, Tensor&, Tensor&) { TANDEM_FAIL("[conv2d] not implemented yet"); }
}  // namespace tandem::cpu
