// GEMM through oneDNN's row-major sgemm (JIT-compiled, AVX2/AVX-512 aware).
// OpenBLAS is not used; oneDNN's sgemm is already a
// dependency and bench/ measures it at the shapes Linear layers use here.

#include <oneapi/dnnl/dnnl.h>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/parallel.h"

namespace tandem::cpu {

void CpuBackend::gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a,
                      const Tensor& b, float beta, Tensor& c) {
  const int64_t m = c.size(0);
  const int64_t n = c.size(1);
  const int64_t k = transpose_a ? a.size(0) : a.size(1);
  if (m == 0 || n == 0) return;
  use_tandem_thread_count();
  const dnnl_status_t status =
      dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k, alpha, a.data<float>(),
                 a.size(1), b.data<float>(), b.size(1), beta, c.data<float>(), n);
  TANDEM_CHECK(status == dnnl_success, "[gemm] oneDNN sgemm failed with status ",
               static_cast<int>(status));
}

}  // namespace tandem::cpu
