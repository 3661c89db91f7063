// GEMM through cuBLAS, with the arguments of Note [Row-major GEMM on cuBLAS] (gemm_args.h):
// float32 (cublasSgemm), or bfloat16 a and b with a float32 c (cublasGemmEx: CUDA_R_16BF inputs,
// CUDA_R_32F output, CUBLAS_COMPUTE_32F), as Note [bfloat16 activations] asks.

#include "engine/cuda/cublas_check.h"
#include "engine/cuda/cublas_library.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/gemm_args.h"
#include "engine/cuda/handles.h"
#include "engine/cuda/on_device.h"
#include "engine/cuda/runtime/cuda_check.h"

namespace tandem::cuda {

void CudaBackend::gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a,
                       const Tensor& b, float beta, Tensor& c) {
  OnDevice on(c, "gemm");
  const bool bfloat16 = a.dtype() == DType::BFloat16;
  TANDEM_CHECK(a.dtype() == b.dtype() && (bfloat16 || a.dtype() == DType::Float32) &&
                   c.dtype() == DType::Float32,
               "[gemm] takes float32 a, b, c or bfloat16 a, b with float32 c; got ",
               dtype_name(a.dtype()), ", ", dtype_name(b.dtype()), ", ", dtype_name(c.dtype()));
  const CublasGemmArgs args = cublas_gemm_args(transpose_a, transpose_b, a.shape(), b.shape());
  TANDEM_CHECK(c.dim() == 2 && c.size(0) == args.n && c.size(1) == args.m, "[gemm] output ",
               shape_str(c.shape()), " is not (", args.n, ", ", args.m, ")");
  if (args.m == 0 || args.n == 0) return;
  if (args.k == 0) {  // an empty sum: C = beta * C (beta 0 must not read C, which may hold NaN)
    if (beta == 0.0f) {
      fill(c, 0.0);
    } else {
      unary(UnaryOp::MulScalar, c, beta, c);
    }
    return;
  }
  const cublasHandle_t handle = cublas_handle(on.index);
  // Note [TF32]: CUBLAS_DEFAULT_MATH computes float32 GEMM in full float32 (unless the
  // NVIDIA_TF32_OVERRIDE environment variable says otherwise); TF32 is opt-in.
  const CublasLibrary& library = cublas();
  CUBLAS_CHECK(library.set_math_mode(
      handle, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  const auto op = [](bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; };
  if (bfloat16) {
    // bfloat16 products are exact in float32 and CUBLAS_COMPUTE_32F accumulates in float32:
    // the tensor cores it may use lose nothing, so the TF32 setting does not matter here.
    CUBLAS_CHECK(library.gemm_ex(handle, op(args.transa), op(args.transb), args.m, args.n, args.k,
                                 &alpha, b.data_ptr(), CUDA_R_16BF, args.lda, a.data_ptr(),
                                 CUDA_R_16BF, args.ldb, &beta, c.data<float>(), CUDA_R_32F,
                                 args.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  CUBLAS_CHECK(library.sgemm(handle, op(args.transa), op(args.transb), args.m, args.n, args.k,
                             &alpha, b.data<float>(), args.lda, a.data<float>(), args.ldb, &beta,
                             c.data<float>(), args.ldc));
}

}  // namespace tandem::cuda
