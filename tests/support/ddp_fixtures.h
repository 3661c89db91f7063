#pragma once
/// What the DDP multi-process tests share: the process group every rank joins (Gloo or MPI),
/// the spawn options, and two small models whose gradients are well conditioned enough to compare a
/// distributed run with one process to float tolerance.

#include <chrono>
#include <memory>

#include "nn/layers.h"
#include "parallel/comm/process_group.h"
#include "tests/support/spawn_ranks.h"

namespace tandem::testing {

/// This rank's Gloo group (from the variables spawn_ranks sets), with a short collective timeout
/// so that a test that goes wrong fails instead of hanging.
std::shared_ptr<parallel::ProcessGroup> gloo_group(
    std::chrono::milliseconds timeout = std::chrono::seconds(30));

/// This rank's MPI group, in a job mpirun started (tests/support/mpirun_ranks.h).
std::shared_ptr<parallel::ProcessGroup> mpi_group(
    std::chrono::milliseconds timeout = std::chrono::seconds(30));

/// Ranks with one kernel thread each (so 4 ranks fit 2 cores), 180 s for the whole job.
SpawnOptions ddp_ranks_options();

/// Linear(6, 5) → ReLU → Linear(5, 3), initialised from `seed`.
std::shared_ptr<nn::Sequential> small_net(uint64_t seed);
/// A (4, 6) input of small_net, its own for each rank and index (a rank's index-th micro-batch);
/// `seed` picks another family of them.
Tensor small_net_batch(int rank, int index, uint64_t seed = 100);

/// conv → bn → relu, twice, then pooling and a classifier: two batch norms whose statistics
/// matter, small enough that float32 rounding stays far below the tests' tolerance. (A
/// train-mode ResNet-20 at 8 images is too ill-conditioned for that: its early gradients move
/// by ~0.4 % when the input moves by 1e-6, so two correct implementations already differ by
/// more.)
std::shared_ptr<nn::Module> conv_bn_net(uint64_t seed);

}  // namespace tandem::testing
