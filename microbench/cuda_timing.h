#pragma once
// Shared by the CUDA microbenchmarks: GPU time per iteration between CUDA events (manual time),
// so host-side launch overhead only shows where it starves the GPU.

#include <benchmark/benchmark.h>

#include "engine/cuda/runtime/stream.h"

namespace tandem::microbench {

/// Runs `step` once untimed (cuDNN's algorithm search, the caching allocator's first blocks),
/// then times each iteration on cuda:0's current stream.
template <typename Step>
void time_on_gpu(benchmark::State& state, Step step) {
  step();
  cuda::Event start(true), end(true);
  const cudaStream_t stream = cuda::current_stream(0);
  for (auto _ : state) {
    start.record(stream, 0);
    step();
    end.record(stream, 0);
    end.synchronize();
    state.SetIterationTime(start.elapsed_ms(end) * 1e-3);
  }
}

}  // namespace tandem::microbench
