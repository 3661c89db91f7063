// GEMM through cuBLAS.
//
// cuBLAS is column-major and Tandem row-major. A row-major (r, c) matrix is the column-major
// (c, r) matrix of its transpose, so C = op(A) op(B) is computed as Cᵀ = op(B)ᵀ op(A)ᵀ: the
// operands swap places and each keeps its own transpose flag and leading dimension (its row
// length), the same call shape as oneDNN's row-major sgemm on the CPU.

#include <climits>

#include "engine/cuda/cublas_library.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/cuda/handles.h"
#include "engine/cuda/on_device.h"

namespace tandem::cuda {

void CudaBackend::gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a,
                       const Tensor& b, float beta, Tensor& c) {
  OnDevice on(c, "gemm");
  const int64_t m = c.size(0);
  const int64_t n = c.size(1);
  const int64_t k = transpose_a ? a.size(0) : a.size(1);
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: C = beta * C (beta 0 must not read C, which may hold NaN)
    if (beta == 0.0f) {
      fill(c, 0.0);
    } else {
      unary(UnaryOp::MulScalar, c, beta, c);
    }
    return;
  }
  TANDEM_CHECK(
      m <= INT_MAX && n <= INT_MAX && k <= INT_MAX && a.size(1) <= INT_MAX && b.size(1) <= INT_MAX,
      "[gemm] dimensions beyond 2^31 are not supported: ", m, "x", k, "x", n);
  const cublasHandle_t handle = cublas_handle(on.index);
  // Note [TF32]: CUBLAS_DEFAULT_MATH computes float32 GEMM in full float32 (unless the
  // NVIDIA_TF32_OVERRIDE environment variable says otherwise); TF32 is opt-in.
  const CublasLibrary& library = cublas();
  CUBLAS_CHECK(library.set_math_mode(
      handle, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  CUBLAS_CHECK(library.sgemm(
      handle, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b.data<float>(),
      static_cast<int>(b.size(1)), a.data<float>(), static_cast<int>(a.size(1)), &beta,
      c.data<float>(), static_cast<int>(n)));
}

}  // namespace tandem::cuda
