#pragma once
// Shared by the backend's .cpp files: the check that a call of Note [bfloat16 activations]
// (engine/backend/backend.h) has its activations in one dtype, float32 or bfloat16.

#include <initializer_list>

#include "engine/cuda/kernels/types.h"
#include "engine/tensor.h"

namespace tandem::cuda {

/// The one dtype of `tensors` (the undefined ones skipped), float32 or bfloat16; throws naming
/// [op] when they differ or are of another dtype.
DType activation_type(const char* op, std::initializer_list<const Tensor*> tensors);

}  // namespace tandem::cuda
