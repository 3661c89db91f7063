// The SGD update, fused into one pass over each parameter.

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/parallel.h"

namespace tandem::cpu {

void CpuBackend::sgd_step(Tensor& param, const Tensor& grad, Tensor& momentum_buffer,
                          const SgdStepOptions& o) {
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  float* buf = o.momentum != 0.0f ? momentum_buffer.data<float>() : nullptr;
  parallel_for(param.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float d = g[i] + o.weight_decay * p[i];
      if (buf != nullptr) {
        buf[i] = o.first_step ? d : o.momentum * buf[i] + (1.0f - o.dampening) * d;
        d = o.nesterov ? d + o.momentum * buf[i] : buf[i];
      }
      p[i] -= o.lr * d;
    }
  });
}

}  // namespace tandem::cpu
