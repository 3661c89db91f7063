// GEMM through oneDNN: float32 through its row-major sgemm (JIT-compiled, AVX2/AVX-512 aware;
// OpenBLAS is not used, and microbench/ measures sgemm at the shapes Linear layers use here);
// bfloat16 through its matmul primitive, which has the bf16 x bf16 -> f32 kernels that the
// C GEMM API of oneDNN 2.6 lacks (Note [bfloat16 activations]).

#include <oneapi/dnnl/dnnl.h>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/dnnl_context.h"
#include "engine/cpu/dnnl_primitive_descs.h"
#include "engine/cpu/float_types.h"
#include "engine/cpu/parallel.h"
#include "engine/cpu_features.h"

namespace tandem::cpu {
namespace {

namespace ctx = dnnl_context;
using dnnl::memory;

struct MatmulPrimitive {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul primitive;
};

// A (rows, cols) operand that is row-major as stored, or the transpose of a stored row-major
// (cols, rows) matrix: oneDNN's matmul takes either through strides, without a copy.
memory::desc operand_desc(int64_t rows, int64_t cols, bool transposed, memory::data_type type) {
  const memory::dims strides = transposed ? memory::dims{1, rows} : memory::dims{cols, 1};
  return memory::desc({rows, cols}, type, strides);
}

MatmulPrimitive create_bf16_matmul(int64_t m, int64_t n, int64_t k, bool transpose_a,
                                   bool transpose_b, float alpha, float beta) {
  const auto bf16 = memory::data_type::bf16;
  // A new attribute, not a copy of ctx::attributes(): oneDNN's C++ attributes are handles, so
  // a copy would share (and alter) the one every other primitive is built with.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  ctx::set_gemm_scales(attr, alpha, beta);
  const auto pd =
      ctx::matmul_pd(operand_desc(m, k, transpose_a, bf16), operand_desc(k, n, transpose_b, bf16),
                     ctx::plain_desc({m, n}), attr);
  return {pd, dnnl::matmul(pd)};
}

void gemm_bf16(bool transpose_a, bool transpose_b, float alpha, const Tensor& a, const Tensor& b,
               float beta, Tensor& c, int64_t k) {
  TANDEM_CHECK(b.dtype() == DType::BFloat16 && c.dtype() == DType::Float32,
               "[gemm] bfloat16 takes a and b in bfloat16 and c in float32, got b ",
               dtype_name(b.dtype()), " and c ", dtype_name(c.dtype()));
  static ctx::PrimitiveCache<MatmulPrimitive> cache;
  const int64_t m = c.size(0);
  const int64_t n = c.size(1);
  const std::string key = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                          (transpose_a ? "T" : "N") + (transpose_b ? "T" : "N") + "a" +
                          std::to_string(alpha) + "b" + std::to_string(beta);
  const auto p = cache.get(
      key, [&] { return create_bf16_matmul(m, n, k, transpose_a, transpose_b, alpha, beta); });
  ctx::execute(p->primitive, p->pd.scratchpad_desc(),
               {{DNNL_ARG_SRC, ctx::wrap(p->pd.src_desc(), a)},
                {DNNL_ARG_WEIGHTS, ctx::wrap(p->pd.weights_desc(), b)},
                {DNNL_ARG_DST, ctx::wrap(c)}});
}

}  // namespace

void CpuBackend::gemm(bool transpose_a, bool transpose_b, float alpha, const Tensor& a,
                      const Tensor& b, float beta, Tensor& c) {
  const int64_t m = c.size(0);
  const int64_t n = c.size(1);
  const int64_t k = transpose_a ? a.size(0) : a.size(1);
  if (m == 0 || n == 0) return;
  if (a.dtype() == DType::BFloat16 && !cpu_has_bf16_primitives()) {
    // An AVX2 CPU (--allow-slow-bf16): sgemm on widened copies, exact products as in bf16.
    return gemm(transpose_a, transpose_b, alpha, widened(a), widened(b), beta, c);
  }
  if (a.dtype() == DType::BFloat16) {
    return gemm_bf16(transpose_a, transpose_b, alpha, a, b, beta, c, k);
  }
  use_tandem_thread_count();
  const dnnl_status_t status =
      dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n, k, alpha, a.data<float>(),
                 a.size(1), b.data<float>(), b.size(1), beta, c.data<float>(), n);
  TANDEM_CHECK(status == dnnl_success, "[gemm] oneDNN sgemm failed with status ",
               static_cast<int>(status));
}

}  // namespace tandem::cpu
