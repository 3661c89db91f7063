#pragma once
/// Counting the host reads of training steps (Note [Counting host reads] in engine/host_reads.h):
/// a test runs a few steps on CPUs and expects none, since each would stall a GPU.

#include <cstdint>

#include "engine/tandem.h"
#include "nn/module.h"
#include "nn/sgd.h"
#include "tests/support/image_batch.h"

namespace tandem::testing {

/// Host reads made while `body` runs.
template <typename Body>
int64_t host_reads_during(Body&& body) {
  const int64_t before = host_read_count();
  body();
  return host_read_count() - before;
}

/// `steps` SGD steps of `model` in training mode on `batch`: forward, loss, backward, step, with
/// nothing read back (a trainer reads its losses every few steps, Note [Host syncs]).
inline void train_steps(nn::Module& model, const ImageBatch& batch, int steps) {
  model.train();
  nn::Sgd sgd(model.parameters(), {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f});
  for (int step = 0; step < steps; ++step) {
    sgd.zero_grad();
    cross_entropy(model.forward(batch.images), batch.labels).backward();
    sgd.step();
  }
}

}  // namespace tandem::testing
