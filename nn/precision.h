#pragma once
/// Note [Mixed precision]: a model's precision says what its convolutions and linear layers
/// compute in. In bfloat16 they cast their input and weight to bfloat16 (a differentiable cast,
/// engine/ops/cast.h) and compute with float32 accumulation; the layers after them take their
/// dtype as it comes, so the activations between layers and their gradients stay bfloat16
/// (half the memory kept for backward), while batch-norm statistics and parameters, the
/// logits (the linear layer gives float32), the loss, the master weights, their gradients and
/// the optimizer state stay float32 (Note [bfloat16 activations] in engine/backend/backend.h).
/// Checkpoints hold the float32 weights whatever the precision, so a run may resume in another.
///
/// It is a property of the model, set with Module::set_precision(), rather than a scope
/// around the forward pass as torch.autocast is: a scope is thread-local state, which
/// DataParallel's worker threads would each have to re-enter (PyTorch's parallel_apply does
/// exactly that), and a forgotten scope silently trains in float32. A model's precision travels
/// with it into every replica and every thread; Keras's per-layer dtype policy
/// ("mixed_bfloat16") makes the same choice.

#include <string>

#include "engine/dtype.h"

namespace tandem::nn {

enum class Precision {
  Float32,   ///< everything in float32
  BFloat16,  ///< convolutions and linear layers in bfloat16, float32 accumulation
};

/// "fp32" or "bf16", the names the command lines use.
const char* precision_name(Precision precision);
/// The dtype that convolutions and linear layers compute in.
DType compute_dtype(Precision precision);

}  // namespace tandem::nn
