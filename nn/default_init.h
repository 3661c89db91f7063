#pragma once
/// The values a layer has before anyone chooses them.
///
/// Note [Initialised at construction]: Conv2d and Linear draw their initial values in their
/// constructors, from one process-wide generator, as PyTorch's layers draw from torch's global
/// generator. A model whose author forgot reset_parameters() then trains from PyTorch's default
/// initialisation instead of all-zero weights, whose loss stays flat without a word (the UX
/// trial of 2026-11-27). manual_seed() makes those draws reproducible; reset_parameters(generator)
/// still chooses the values explicitly, and make_resnet does so. Builders that overwrite every
/// value at once (clone()'s twin, make_resnet) construct under SkipDefaultInit: they neither pay
/// for the draw nor move the shared generator, so a model built after a clone gets the values it
/// would have got without it.

#include <cstdint>
#include <functional>

#include "engine/random.h"

namespace tandem::nn {

/// Seeds the generator that layers draw from when constructed (seed 0 until called).
void manual_seed(uint64_t seed);

/// While one is alive on this thread, constructed layers keep their zeros.
class SkipDefaultInit {
 public:
  SkipDefaultInit();
  ~SkipDefaultInit();
  SkipDefaultInit(const SkipDefaultInit&) = delete;
  SkipDefaultInit& operator=(const SkipDefaultInit&) = delete;

 private:
  bool was_skipping_;
};

/// Runs `draw` with the process-wide generator, one caller at a time (layers may be built on
/// several threads), unless this thread is under SkipDefaultInit.
void draw_default_init(const std::function<void(Generator&)>& draw);

}  // namespace tandem::nn
