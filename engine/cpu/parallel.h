#pragma once
/// Intra-op parallelism for CPU kernels: OpenMP teams sized by tandem::num_threads()
/// of the calling thread (OpenMP's thread count is per calling thread, which is
/// what lets two DataParallel replicas each use their own share of cores).

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "engine/threads.h"

namespace tandem::cpu {

/// Calls body(begin, end) on disjoint chunks of [0, n); serial below 2 * grain items.
template <typename Body>
void parallel_for(int64_t n, int64_t grain, const Body& body) {
  const int threads =
      static_cast<int>(std::min<int64_t>(num_threads(), std::max<int64_t>(n / grain, 1)));
  if (threads <= 1) {
    if (n > 0) body(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t id = omp_get_thread_num();
    const int64_t team = omp_get_num_threads();
    const int64_t begin = n * id / team;
    const int64_t end = n * (id + 1) / team;
    if (begin < end) body(begin, end);
  }
}

/// oneDNN (OpenMP runtime) reads the calling thread's OpenMP thread count; set it first.
inline void use_tandem_thread_count() {
  omp_set_num_threads(num_threads());
}

}  // namespace tandem::cpu
