// PLACEHOLDER: implemented with the oneDNN kernels.
#include "engine/ops/conv.h"
namespace tandem {
Tensor conv2d(const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&) { TANDEM_FAIL("[conv2d] not implemented yet"); }
}  // namespace tandem
