#pragma once
/// The choice of a cuDNN convolution algorithm from cuDNN's perf results (used by conv.cpp).
/// CUDA-free on purpose: the CUDA side copies each cudnnConvolution*AlgoPerf_t into a ConvAlgoPerf
/// and cuDNN's enums travel as ints, so the rules below are unit-tested without cuDNN.

#include <cstddef>
#include <vector>

#include "engine/error.h"

namespace tandem::cuda {

/// One cuDNN perf result, as the CUDA side copies it.
struct ConvAlgoPerf {
  int algo = 0;                ///< the direction's cudnnConvolution*Algo_t
  bool succeeded = false;      ///< status == CUDNN_STATUS_SUCCESS
  size_t workspace = 0;        ///< memory, in bytes
  int math = 0;                ///< cudnnMathType_t the algorithm was timed or chosen with
  bool fma_math = false;       ///< math == CUDNN_FMA_MATH: no TF32 tensor-core arithmetic
  bool deterministic = false;  ///< determinism == CUDNN_DETERMINISTIC
};

/// An algorithm to run, with the workspace and math type it needs.
struct ConvAlgoChoice {
  int algo = 0;
  size_t workspace = 0;
  int math = 0;
  bool operator==(const ConvAlgoChoice&) const = default;
};

struct ConvAlgoOptions {
  bool allow_tf32 = false;     ///< Note [TF32]: without it only FMA-math results qualify
  bool deterministic = false;  ///< only CUDNN_DETERMINISTIC results (TANDEM_CUDNN_DETERMINISTIC)
  size_t max_workspace = 0;    ///< results asking for more are skipped
  /// What works for every float32 shape, used after every result that qualifies: the plain
  /// implicit GEMM forward, and BWD_*_ALGO_0 backward (atomics, so not deterministic).
  ConvAlgoChoice fallback;
  /// The same for deterministic runs: BWD_*_ALGO_1 backward.
  ConvAlgoChoice deterministic_fallback;
};

/// Note [Convolution algorithm choice]: the algorithms to try, best first: the results that
/// succeeded, keep the TF32 policy, fit max_workspace and, when asked, are deterministic, in
/// cuDNN's order (fastest first, both from cudnnFind and from the heuristics), then the fallback
/// unless already listed. Never empty. A caller short of memory for one workspace moves on to
/// the next (first_that_fits), so the last resort is the fallback.
std::vector<ConvAlgoChoice> rank_algorithms(const ConvAlgoPerf* perf, int count,
                                            const ConvAlgoOptions& options);

/// The first of rank_algorithms: what to run when memory allows.
ConvAlgoChoice pick_algorithm(const ConvAlgoPerf* perf, int count, const ConvAlgoOptions& options);

/// The index of the first candidate for which `allocate(workspace bytes)` does not throw a
/// tandem::Error (the caching allocator's out of memory); rethrows the last candidate's error
/// when none fits. `candidates` must not be empty.
template <typename Allocate>
size_t first_that_fits(const std::vector<ConvAlgoChoice>& candidates, const Allocate& allocate) {
  TANDEM_CHECK(!candidates.empty(), "[conv2d] no algorithm to try");
  for (size_t i = 0;; ++i) {
    try {
      allocate(candidates[i].workspace);
      return i;
    } catch (const Error&) {
      if (i + 1 == candidates.size()) throw;
    }
  }
}

/// Note [Workspace without emptying the cache]: every candidate first through `try_fit(bytes)`
/// (true when the workspace could be had without emptying the allocator's cache, which
/// synchronises the device), and only when none fits so, first_that_fits(candidates, fit) with
/// `fit` free to empty it. Under memory pressure a leaner algorithm then runs from the cache,
/// instead of every convolution of every step emptying it and missing it again.
template <typename TryFit, typename Fit>
size_t first_that_fits(const std::vector<ConvAlgoChoice>& candidates, const TryFit& try_fit,
                       const Fit& fit) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (try_fit(candidates[i].workspace)) return i;
  }
  return first_that_fits(candidates, fit);
}

/// Whether an environment variable's value (getenv's, may be null) turns a flag on such as
/// TANDEM_CUDNN_DETERMINISTIC: set, not empty and not starting with '0'.
bool environment_flag(const char* value);

}  // namespace tandem::cuda
