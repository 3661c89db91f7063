// PLACEHOLDER: implemented with the oneDNN kernels.
#include "engine/ops/pool.h"
namespace tandem {
Tensor max_pool2d(const Tensor&, const Pool2dOptions&) { TANDEM_FAIL("[max_pool2d] not implemented yet"); }
Tensor adaptive_avg_pool2d(const Tensor&, int64_t, int64_t) { TANDEM_FAIL("[adaptive_avg_pool2d] not implemented yet"); }
}  // namespace tandem
