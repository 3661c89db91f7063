#pragma once
/// The caching allocator's scenarios (engine/cuda/runtime/caching_allocator.h), written once and
/// run on every runtime beneath it, after PyTorch's instantiate_device_type_tests: on the fake
/// CUDA runtime (tests/engine/cuda/runtime/caching_allocator_test.cpp, label "unit", every build)
/// and on a GPU (tests/engine/cuda/cuda_runtime_gpu_test.cpp, label "gpu"). Each scenario makes its
/// own CachingAllocator on device 0, so its statistics start from zero, and gives back all it took.
///
/// Checks that only one runtime can make stay beside the call: the fake's cudaMalloc count, say,
/// or a GPU's training step.

#include <cstdint>
#include <functional>
#include <string>

namespace tandem::testing::allocator_scenarios {

/// The runtime beneath the allocator, as far as a scenario can see it. The fake runtime knows
/// every byte it hands out; a GPU is shared with the CUDA context and the libraries, so there the
/// exact checks are left out.
struct Runtime {
  /// Steps each of the stress test's four threads takes.
  int stress_steps = 2000;
  /// Bytes the runtime's cudaMalloc holds on device 0, where it knows them exactly; empty on a GPU.
  std::function<int64_t()> device_bytes_in_use;
  /// What the out-of-memory error says of the device's memory ("the device has 1024 MiB free of
  /// 1024 MiB"), where the runtime's numbers are fixed; empty on a GPU.
  std::string out_of_memory_detail;
};

void rounds_sizes_and_serves_a_freed_block_again();
void counts_allocated_reserved_and_peak();
void splits_segments_and_merges_freed_neighbours();
void empty_cache_gives_every_free_segment_back(const Runtime& runtime);
void blocks_belong_to_their_stream();
void recorded_stream_delays_reuse_until_it_has_run();
void threads_allocate_and_free_concurrently_without_overlap(const Runtime& runtime);
void out_of_memory_is_a_clear_error(const Runtime& runtime);

}  // namespace tandem::testing::allocator_scenarios
