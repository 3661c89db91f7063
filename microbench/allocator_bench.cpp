// Host allocation of activation-sized blocks (1, 4, 16 and 64 MiB): allocate, touch every page,
// free, through cpu_allocator() (Note [CPU caching allocator]), plain aligned_alloc/free and
// mmap/munmap (what cpu_allocator() does with TANDEM_CPU_CACHE_MB=0, and glibc for a block above
// its mmap threshold). Reports the minor page faults per iteration, which is what caching removes.
// glibc raises its threshold to the size of an mmap'ed block it frees, up to 32 MiB, so in this
// loop of one size it reuses blocks up to 16 MiB from its heap; 64 MiB (a ResNet-18 activation
// at batch 128 is 32 MiB) is mmap'ed every time. With several sizes and threads it trims and
// faults less predictably (docs/benchmarks.md).
//
//   ./build/microbench/bench_allocator [--benchmark_filter=...]

#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdlib>

#include "engine/allocator.h"

namespace {

constexpr size_t kPage = 4096;

// Writes one byte per page: the first write to a fresh page is what faults.
void touch(void* ptr, size_t nbytes) {
  auto* bytes = static_cast<volatile char*>(ptr);
  for (size_t i = 0; i < nbytes; i += kPage) bytes[i] = 1;
}

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

template <typename Allocate, typename Free>
void run(benchmark::State& state, Allocate allocate, Free free) {
  const size_t nbytes = static_cast<size_t>(state.range(0)) << 20;
  // First use, untimed: the cache (or glibc) has nothing yet, and the block's pages are new.
  void* first = allocate(nbytes);
  if (first != nullptr) touch(first, nbytes);
  free(first, nbytes);
  const long faults_before = minor_faults();
  for (auto _ : state) {
    void* ptr = allocate(nbytes);
    if (ptr == nullptr) {
      state.SkipWithError("allocation failed");
      break;
    }
    touch(ptr, nbytes);
    benchmark::DoNotOptimize(ptr);
    free(ptr, nbytes);
  }
  state.counters["faults/iter"] = benchmark::Counter(
      static_cast<double>(minor_faults() - faults_before), benchmark::Counter::kAvgIterations);
}

void BM_CpuAllocator(benchmark::State& state) {
  tandem::CpuAllocator& allocator = tandem::cpu_allocator();
  run(
      state, [&](size_t n) { return allocator.allocate(n); },
      [&](void* p, size_t n) { allocator.deallocate(p, n); });
}

void BM_AlignedAlloc(benchmark::State& state) {
  run(
      state, [](size_t n) { return std::aligned_alloc(tandem::CpuAllocator::kAlignment, n); },
      [](void* p, size_t) { std::free(p); });
}

void BM_MmapMunmap(benchmark::State& state) {
  run(
      state,
      [](size_t n) {
        void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? nullptr : p;
      },
      [](void* p, size_t n) { munmap(p, n); });
}

// Block sizes in MiB.
#define BLOCK_SIZES Arg(1)->Arg(4)->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond)
BENCHMARK(BM_CpuAllocator)->BLOCK_SIZES;
BENCHMARK(BM_AlignedAlloc)->BLOCK_SIZES;
BENCHMARK(BM_MmapMunmap)->BLOCK_SIZES;

}  // namespace

BENCHMARK_MAIN();
