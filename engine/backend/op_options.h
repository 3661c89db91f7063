#pragma once
/// The options of the ops that take more than tensors: convolution, pooling, batch norm's running
/// statistics, SGD. Shared by the
/// op front-ends and the backends' kernels (engine/backend/backend.h), and by their callers in nn/.

#include <cstdint>

#include "engine/tensor.h"

namespace tandem {

struct Conv2dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
};

struct Pool2dOptions {
  int64_t kernel_size = 2;
  int64_t stride = 2;
  int64_t padding = 0;
};

/// One SGD step with PyTorch's semantics (torch.optim.SGD).
struct SgdStepOptions {
  float lr = 0.1f;
  float momentum = 0.0f;
  float dampening = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
  bool first_step = false;  ///< momentum buffer is initialised to the gradient, as PyTorch does
};

/// The running statistics that a training batch norm updates in place (torch.nn.BatchNorm2d's
/// buffers): running = (1 - momentum) * running + momentum * batch, the variance entering
/// unbiased (Note [Running statistics] in engine/running_statistics.h). Tensors are handles.
struct BatchNormRunning {
  Tensor mean;  ///< (C) float32 (1-D, so contiguous); undefined: none are kept
  Tensor var;   ///< (C) float32; defined with mean
  float momentum = 0.1f;
};

/// One parameter of a multi-tensor SGD step. Tensors are handles (they alias the caller's
/// storage), so the step updates param and momentum_buffer in place.
struct SgdTensors {
  Tensor param;
  Tensor grad;
  Tensor momentum_buffer;  ///< may be undefined when momentum is 0
};

}  // namespace tandem
