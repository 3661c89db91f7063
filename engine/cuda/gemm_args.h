#pragma once
/// The cublasSgemm arguments of a row-major GEMM (used by matmul.cpp). CUDA-free: a plain
/// function of transposes and shapes, so it is unit-tested against a CPU column-major sgemm on
/// machines without cuBLAS.
///
/// Note [Row-major GEMM on cuBLAS]: cuBLAS is column-major and Tandem row-major. A row-major
/// (r, c) matrix is the column-major (c, r) matrix of its transpose, so C = op(a) op(b) is
/// computed as Cᵀ = op(b)ᵀ op(a)ᵀ: the operands swap places (cuBLAS's A is Tandem's b) and each
/// keeps its own transpose flag and leading dimension (its row length), the same call shape as
/// oneDNN's row-major sgemm on the CPU.

#include "engine/shape.h"

namespace tandem::cuda {

/// cublasSgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc) in cuBLAS's
/// own names, with A = Tandem's b and B = Tandem's a (Note [Row-major GEMM on cuBLAS]).
struct CublasGemmArgs {
  bool transa = false;  ///< CUBLAS_OP_T when true, else CUBLAS_OP_N
  bool transb = false;
  int m = 0;  ///< columns of Tandem's C
  int n = 0;  ///< rows of Tandem's C
  int k = 0;
  int lda = 0;  ///< row length of Tandem's b
  int ldb = 0;  ///< row length of Tandem's a
  int ldc = 0;  ///< row length of Tandem's C
};

/// The arguments that compute the row-major c: (m, n) = op(a) op(b), where op transposes when
/// asked. a and b are 2-D and contiguous; their inner dims must agree. Throws naming [gemm] when
/// they do not, or when a size does not fit cuBLAS's int.
CublasGemmArgs cublas_gemm_args(bool transpose_a, bool transpose_b, const Shape& a, const Shape& b);

}  // namespace tandem::cuda
