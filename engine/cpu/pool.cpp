// PLACEHOLDER: pooling arrives in the next commit.
#include "engine/cpu/cpu_backend.h"
namespace tandem::cpu {
void CpuBackend::max_pool2d_forward(const Tensor&, const Pool2dOptions&, Tensor&, Tensor&) { TANDEM_FAIL("[max_pool2d] not implemented yet"); }
void CpuBackend::max_pool2d_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Pool2dOptions&, Tensor&) { TANDEM_FAIL("[max_pool2d] not implemented yet"); }
void CpuBackend::adaptive_avg_pool2d_forward(const Tensor&, Tensor&) { TANDEM_FAIL("[adaptive_avg_pool2d] not implemented yet"); }
void CpuBackend::adaptive_avg_pool2d_backward(const Tensor&, Tensor&) { TANDEM_FAIL("[adaptive_avg_pool2d] not implemented yet"); }
}  // namespace tandem::cpu
