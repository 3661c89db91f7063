// PLACEHOLDER: implemented with the oneDNN kernels.
#include "engine/ops/norm.h"
namespace tandem {
Tensor batch_norm2d(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const BatchNormOptions&) { TANDEM_FAIL("[batch_norm2d] not implemented yet"); }
}  // namespace tandem
