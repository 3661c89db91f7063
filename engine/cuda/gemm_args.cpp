#include "engine/cuda/gemm_args.h"

#include <algorithm>
#include <climits>

#include "engine/error.h"

namespace tandem::cuda {

CublasGemmArgs cublas_gemm_args(bool transpose_a, bool transpose_b, const Shape& a,
                                const Shape& b) {
  TANDEM_CHECK(a.size() == 2 && b.size() == 2, "[gemm] needs 2-D operands, got ", shape_str(a),
               " and ", shape_str(b));
  const int64_t m = transpose_a ? a[1] : a[0];
  const int64_t k = transpose_a ? a[0] : a[1];
  const int64_t n = transpose_b ? b[0] : b[1];
  const int64_t b_k = transpose_b ? b[1] : b[0];
  TANDEM_CHECK(k == b_k, "[gemm] inner dims differ: ", shape_str(a),
               transpose_a ? " transposed" : "", " times ", shape_str(b),
               transpose_b ? " transposed" : "");
  for (const int64_t size : {a[0], a[1], b[0], b[1]}) {
    TANDEM_CHECK(size <= INT_MAX, "[gemm] dimensions beyond 2^31 are not supported: ", m, "x", k,
                 "x", n);
  }
  // cuBLAS requires leading dimensions >= 1 even for empty matrices.
  const auto ld = [](int64_t row_length) {
    return static_cast<int>(std::max<int64_t>(row_length, 1));
  };
  CublasGemmArgs args;
  args.transa = transpose_b;
  args.transb = transpose_a;
  args.m = static_cast<int>(n);
  args.n = static_cast<int>(m);
  args.k = static_cast<int>(k);
  args.lda = ld(b[1]);
  args.ldb = ld(a[1]);
  args.ldc = ld(n);
  return args;
}

}  // namespace tandem::cuda
