// Convolution through cuDNN: forward, backward-data and backward-filter, NCHW, float32 or
// bfloat16.
//
// Note [bfloat16 convolutions]: x, w, y and their gradients may be bfloat16 (Note [bfloat16
// activations] in engine/backend/backend.h); the descriptors then say CUDNN_DATA_BFLOAT16 and the
// convolution still computes in float32 (cuDNN's PSEUDO_BFLOAT16 configuration), each output
// rounded once to bfloat16. The products of bfloat16 values are exact in float32, so tensor-core
// math loses nothing here and is always allowed (CUDNN_DEFAULT_MATH; the TF32 policy concerns
// float32 data only). A bias stays float32 and is added by Tandem's kernel after cuDNN's output
// has been rounded, so a biased bfloat16 output is rounded twice (within one bfloat16 ulp of
// rounding once); its gradient is a float32 sum of the bfloat16 grad_y. The algorithm caches
// are keyed by the dtype as well.
//
// Note [Convolution algorithms]: cuDNN offers several algorithms per direction (implicit GEMM,
// FFT, Winograd, ...) whose speed depends on the shape and the GPU. The first call for a shape
// runs every candidate once on the real tensors (cudnnFind*Ex, like
// torch.backends.cudnn.benchmark); with benchmarking off cuDNN's heuristics rank them instead
// (cudnnGet*_v7). The ranking that keeps the TF32 and determinism policies and the workspace cap
// (Note [Convolution algorithm choice] in conv_algorithm.h) is cached for the process, per device
// (Note [Algorithm caches]) and keyed by direction, shapes, stride, padding and policy.
// Workspaces come from the caching allocator; when one does not fit, the next algorithm runs.
// With TF32 off the descriptor asks for FMA math only, so no tensor-core TF32 kernel is used.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/cuda/activation_type.h"
#include "engine/cuda/conv_algorithm.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cudnn_check.h"
#include "engine/cuda/cudnn_descriptors.h"
#include "engine/cuda/handles.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/on_device.h"
#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"

namespace tandem::cuda {
namespace {

constexpr size_t kMaxSearchWorkspace = size_t{1} << 30;  // what the search may try, at most

/// Descriptors and data of one convolution call: x (N, C, H, W), w (K, C, R, S), y (N, K, P, Q).
/// Which of the three is written depends on the direction.
struct ConvCall {
  ConvCall(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dOptions& options,
           const char* op)
      : bfloat16(activation_type(op, {&x, &w, &y}) == DType::BFloat16),
        x_desc(x.shape(), data_type()),
        w_desc(w.shape(), data_type()),
        y_desc(y.shape(), data_type()),
        conv_desc(options.stride, options.padding),
        x_data(x.data_ptr()),
        w_data(w.data_ptr()),
        y_data(y.data_ptr()) {}

  cudnnDataType_t data_type() const { return bfloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT; }
  /// Note [bfloat16 convolutions]: tensor cores for bfloat16 always, for float32 only with TF32.
  cudnnMathType_t math_type(bool allow_tf32) const {
    return bfloat16 || allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  }

  bool bfloat16;  ///< x, w and y are bfloat16, else float32
  TensorDescriptor x_desc;
  FilterDescriptor w_desc;
  TensorDescriptor y_desc;
  ConvolutionDescriptor conv_desc;
  void* x_data;
  void* w_data;
  void* y_data;
};

// One struct per direction gives the generic search below its cuDNN calls.
struct Forward {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algo = cudnnConvolutionFwdAlgo_t;
  static constexpr const char* kName = "conv2d";
  static constexpr int kAlgoCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static constexpr Algo kFallback = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  static constexpr Algo kDeterministicFallback = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;

  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvCall& c, Algo algo, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, c.x_desc.get(), c.w_desc.get(),
                                                   c.conv_desc.get(), c.y_desc.get(), algo, bytes);
  }
  static void heuristics(cudnnHandle_t h, const ConvCall& c, int* count, Perf* perf) {
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, c.x_desc.get(), c.w_desc.get(),
                                                       c.conv_desc.get(), c.y_desc.get(),
                                                       kAlgoCount, count, perf));
  }
  static void find(cudnnHandle_t h, const ConvCall& c, int* count, Perf* perf, void* ws,
                   size_t ws_bytes) {
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
        h, c.x_desc.get(), c.x_data, c.w_desc.get(), c.w_data, c.conv_desc.get(), c.y_desc.get(),
        c.y_data, kAlgoCount, count, perf, ws, ws_bytes));
  }
};

struct BackwardData {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  static constexpr const char* kName = "conv2d_backward_input";
  static constexpr int kAlgoCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static constexpr Algo kFallback = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;  // atomics
  static constexpr Algo kDeterministicFallback = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;

  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvCall& c, Algo algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(
        h, c.w_desc.get(), c.y_desc.get(), c.conv_desc.get(), c.x_desc.get(), algo, bytes);
  }
  static void heuristics(cudnnHandle_t h, const ConvCall& c, int* count, Perf* perf) {
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, c.w_desc.get(), c.y_desc.get(),
                                                            c.conv_desc.get(), c.x_desc.get(),
                                                            kAlgoCount, count, perf));
  }
  static void find(cudnnHandle_t h, const ConvCall& c, int* count, Perf* perf, void* ws,
                   size_t ws_bytes) {
    CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, c.w_desc.get(), c.w_data, c.y_desc.get(), c.y_data, c.conv_desc.get(), c.x_desc.get(),
        c.x_data, kAlgoCount, count, perf, ws, ws_bytes));
  }
};

struct BackwardFilter {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr const char* kName = "conv2d_backward_weight";
  static constexpr int kAlgoCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static constexpr Algo kFallback = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;  // atomics
  static constexpr Algo kDeterministicFallback = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;

  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvCall& c, Algo algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
        h, c.x_desc.get(), c.y_desc.get(), c.conv_desc.get(), c.w_desc.get(), algo, bytes);
  }
  static void heuristics(cudnnHandle_t h, const ConvCall& c, int* count, Perf* perf) {
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, c.x_desc.get(), c.y_desc.get(),
                                                              c.conv_desc.get(), c.w_desc.get(),
                                                              kAlgoCount, count, perf));
  }
  static void find(cudnnHandle_t h, const ConvCall& c, int* count, Perf* perf, void* ws,
                   size_t ws_bytes) {
    CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        h, c.x_desc.get(), c.x_data, c.y_desc.get(), c.y_data, c.conv_desc.get(), c.w_desc.get(),
        c.w_data, kAlgoCount, count, perf, ws, ws_bytes));
  }
};

// TANDEM_CUDNN_LOG=1 prints each algorithm choice to stderr (once per shape).
bool log_choices() {
  static const bool enabled = environment_flag(std::getenv("TANDEM_CUDNN_LOG"));
  return enabled;
}

// TANDEM_CUDNN_DETERMINISTIC=1 keeps only deterministic algorithms (Note [Convolution
// algorithm choice]), so GPU runs and resumed runs repeat bit for bit.
bool deterministic_algorithms() {
  static const bool enabled = environment_flag(std::getenv("TANDEM_CUDNN_DETERMINISTIC"));
  return enabled;
}

// cuDNN keeps the detail of its last failure per thread, and CUDNN_CHECK quotes it
// (library_errors.cpp); reading it clears it, so that a later, unrelated error is not described
// by an earlier, expected one.
void forget_cudnn_error_detail() {
  char ignored[512];
  cudnnGetLastErrorString(ignored, sizeof(ignored));
}

// The largest workspace any algorithm asks for, capped: what the search may use.
template <typename Direction>
size_t search_workspace(cudnnHandle_t handle, const ConvCall& call) {
  size_t largest = 0;
  bool unsupported = false;
  for (int algo = 0; algo < Direction::kAlgoCount; ++algo) {
    size_t bytes = 0;
    const auto status =
        Direction::workspace(handle, call, static_cast<typename Direction::Algo>(algo), &bytes);
    if (status == CUDNN_STATUS_SUCCESS && bytes <= kMaxSearchWorkspace) {
      largest = std::max(largest, bytes);
    }
    unsupported = unsupported || status != CUDNN_STATUS_SUCCESS;
  }
  if (unsupported) forget_cudnn_error_detail();  // the probes' NOT_SUPPORTED details
  return largest;
}

// cudnnFind*Ex over a workspace as large as any candidate needs (0 when that does not fit).
template <typename Direction>
int find(cudnnHandle_t handle, const ConvCall& call, int device,
         std::vector<typename Direction::Perf>& perf) {
  size_t bytes = search_workspace<Direction>(handle, call);
  void* workspace = nullptr;
  CachingAllocator& allocator = caching_allocator(device);
  try {
    workspace = allocator.allocate(bytes);
  } catch (const Error&) {
    bytes = 0;  // short of memory: search among the algorithms that need no workspace
  }
  int count = 0;
  try {
    Direction::find(handle, call, &count, perf.data(), workspace, bytes);
  } catch (...) {
    allocator.deallocate(workspace, bytes);
    throw;
  }
  allocator.deallocate(workspace, bytes);
  return count;
}

// Both fallbacks are described, though only one can be used: where cuDNN cannot size one for
// this shape it is left at 0 bytes, and only running it (if it is ever chosen) reports the error.
template <typename Direction>
ConvAlgoChoice fallback(cudnnHandle_t handle, const ConvCall& call, typename Direction::Algo algo,
                        cudnnMathType_t math) {
  ConvAlgoChoice choice{static_cast<int>(algo), 0, math};
  if (Direction::workspace(handle, call, algo, &choice.workspace) != CUDNN_STATUS_SUCCESS) {
    choice.workspace = 0;
  }
  return choice;
}

// Note [Convolution algorithm choice] (conv_algorithm.h) over cudnnFind or the heuristics; both
// are capped at kMaxSearchWorkspace.
template <typename Direction>
std::vector<ConvAlgoChoice> search(cudnnHandle_t handle, const ConvCall& call, int device,
                                   const ConvAlgoOptions& policy, bool benchmark) {
  std::vector<typename Direction::Perf> perf(Direction::kAlgoCount);
  int count = 0;
  if (benchmark) {
    count = find<Direction>(handle, call, device, perf);
  } else {
    Direction::heuristics(handle, call, &count, perf.data());
  }
  std::vector<ConvAlgoPerf> results;
  for (int i = 0; i < count; ++i) {
    const auto& p = perf[static_cast<size_t>(i)];
    results.push_back({static_cast<int>(p.algo), p.status == CUDNN_STATUS_SUCCESS, p.memory,
                       static_cast<int>(p.mathType), p.mathType == CUDNN_FMA_MATH,
                       p.determinism == CUDNN_DETERMINISTIC});
  }
  ConvAlgoOptions options = policy;
  options.max_workspace = kMaxSearchWorkspace;
  // float32's fallbacks run in FMA math whatever the TF32 policy; bfloat16 has tensor cores.
  const cudnnMathType_t math = call.bfloat16 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  options.fallback = fallback<Direction>(handle, call, Direction::kFallback, math);
  options.deterministic_fallback =
      fallback<Direction>(handle, call, Direction::kDeterministicFallback, math);
  // Find, the heuristics and the fallbacks' workspace probes may each have left a detail behind
  // (NOT_SUPPORTED for a bfloat16 ALGO_0, say) that a later, unrelated CUDNN_CHECK would quote.
  forget_cudnn_error_detail();
  return rank_algorithms(results.data(), static_cast<int>(results.size()), options);
}

// Note [Algorithm caches]: one cache per device, so DataParallel replicas on different GPUs
// search and look up at once; within a device the lock is held across the search, which keeps
// two threads from timing algorithms against each other on one GPU. Entries are never erased,
// so a reference into the map stays valid after the lock is released.
struct AlgorithmCache {
  std::mutex mutex;
  std::unordered_map<std::string, std::vector<ConvAlgoChoice>> choices;
};

template <typename Direction>
AlgorithmCache& algorithm_cache(int device) {
  // Never destroyed: a thread may still convolve during static destruction.
  static auto* caches = new std::vector<AlgorithmCache>(static_cast<size_t>(device_count()));
  return (*caches)[static_cast<size_t>(device)];
}

template <typename Direction>
const std::vector<ConvAlgoChoice>& choose(cudnnHandle_t handle, ConvCall& call, int device,
                                          const std::string& shape_key, bool allow_tf32,
                                          bool benchmark) {
  const bool deterministic = deterministic_algorithms();
  // detail::concat rather than operator+: GCC 12 warns falsely (-Wrestrict) on the chain.
  const std::string key =
      tandem::detail::concat(shape_key, allow_tf32 ? "tf32" : "fp32",
                             benchmark ? "find" : "heuristic", deterministic ? "det" : "");
  AlgorithmCache& cache = algorithm_cache<Direction>(device);
  std::lock_guard lock(cache.mutex);
  if (const auto it = cache.choices.find(key); it != cache.choices.end()) return it->second;
  call.conv_desc.set_math_type(call.math_type(allow_tf32));
  ConvAlgoOptions policy;
  // Note [bfloat16 convolutions]: results in tensor-op math qualify for bfloat16 as TF32 ones do
  // for float32 when allowed.
  policy.allow_tf32 = allow_tf32 || call.bfloat16;
  policy.deterministic = deterministic;
  const auto it =
      cache.choices.emplace(key, search<Direction>(handle, call, device, policy, benchmark)).first;
  const ConvAlgoChoice& best = it->second.front();
  if (log_choices()) {
    std::fprintf(stderr, "[%s] cuda:%d %s: algorithm %d, workspace %zu bytes, math type %d\n",
                 Direction::kName, device, key.c_str(), best.algo, best.workspace, best.math);
  }
  return it->second;
}

// The first choice whose workspace the allocator can give now (Note [Convolution algorithm
// choice]): when memory is tight a leaner algorithm runs instead of the op failing.
const ConvAlgoChoice& with_workspace(const std::vector<ConvAlgoChoice>& choices, int device,
                                     std::optional<DeviceBuffer>& workspace) {
  const auto from_the_cache = [&](size_t bytes) {  // Note [Workspace without emptying the cache]
    workspace.emplace(device, bytes, std::nothrow);
    if (bytes == 0 || workspace->data() != nullptr) return true;
    workspace.reset();
    return false;
  };
  const size_t index = first_that_fits(choices, from_the_cache,
                                       [&](size_t bytes) { workspace.emplace(device, bytes); });
  return choices[index];
}

std::string shape_key(const Tensor& x, const Tensor& w, const Conv2dOptions& options) {
  return tandem::detail::concat(dtype_name(x.dtype()), "x", shape_str(x.shape()), "w",
                                shape_str(w.shape()), "s", options.stride, "p", options.padding);
}

}  // namespace

void CudaBackend::conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias,
                                 const Conv2dOptions& options, Tensor& y) {
  OnDevice on(y, Forward::kName);
  if (y.numel() == 0) return;
  ConvCall call(x, w, y, options, Forward::kName);
  const cudnnHandle_t handle = cudnn_handle(on.index);
  std::optional<DeviceBuffer> workspace;
  const ConvAlgoChoice& choice =
      with_workspace(choose<Forward>(handle, call, on.index, shape_key(x, w, options), allow_tf32(),
                                     cudnn_benchmark()),
                     on.index, workspace);
  call.conv_desc.set_math_type(static_cast<cudnnMathType_t>(choice.math));
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnConvolutionForward(
      handle, &one, call.x_desc.get(), call.x_data, call.w_desc.get(), call.w_data,
      call.conv_desc.get(), static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo), workspace->data(),
      workspace->size(), &zero, call.y_desc.get(), call.y_data));
  if (bias.defined()) {  // float32 whatever y's dtype (Note [bfloat16 convolutions])
    kernels::add_channel_bias(y.data_ptr(), y.dtype(), bias.data<float>(), y.size(0), y.size(1),
                              y.size(2) * y.size(3), on.stream);
  }
}

void CudaBackend::conv2d_backward_input(const Tensor& grad_y, const Tensor& w,
                                        const Conv2dOptions& options, Tensor& grad_x) {
  OnDevice on(grad_x, BackwardData::kName);
  if (grad_x.numel() == 0) return;
  ConvCall call(grad_x, w, grad_y, options, BackwardData::kName);
  const cudnnHandle_t handle = cudnn_handle(on.index);
  std::optional<DeviceBuffer> workspace;
  const ConvAlgoChoice& choice =
      with_workspace(choose<BackwardData>(handle, call, on.index, shape_key(grad_x, w, options),
                                          allow_tf32(), cudnn_benchmark()),
                     on.index, workspace);
  call.conv_desc.set_math_type(static_cast<cudnnMathType_t>(choice.math));
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnConvolutionBackwardData(
      handle, &one, call.w_desc.get(), call.w_data, call.y_desc.get(), call.y_data,
      call.conv_desc.get(), static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo),
      workspace->data(), workspace->size(), &zero, call.x_desc.get(), call.x_data));
}

void CudaBackend::conv2d_backward_weight(const Tensor& grad_y, const Tensor& x,
                                         const Conv2dOptions& options, Tensor& grad_w,
                                         Tensor& grad_bias) {
  OnDevice on(grad_w, BackwardFilter::kName);
  if (grad_w.numel() == 0) return;
  if (grad_y.numel() == 0) {  // an empty batch contributes nothing
    fill(grad_w, 0.0);
    if (grad_bias.defined()) fill(grad_bias, 0.0);
    return;
  }
  ConvCall call(x, grad_w, grad_y, options, BackwardFilter::kName);
  const cudnnHandle_t handle = cudnn_handle(on.index);
  std::optional<DeviceBuffer> workspace;
  const ConvAlgoChoice& choice =
      with_workspace(choose<BackwardFilter>(handle, call, on.index, shape_key(x, grad_w, options),
                                            allow_tf32(), cudnn_benchmark()),
                     on.index, workspace);
  call.conv_desc.set_math_type(static_cast<cudnnMathType_t>(choice.math));
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      handle, &one, call.x_desc.get(), call.x_data, call.y_desc.get(), call.y_data,
      call.conv_desc.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo),
      workspace->data(), workspace->size(), &zero, call.w_desc.get(), call.w_data));
  // grad_bias: (K) float32 = grad_y summed over (N, P, Q), with the deterministic reduction
  // kernel; from a bfloat16 grad_y too (Note [bfloat16 convolutions]).
  if (grad_bias.defined()) sum_into(grad_y, {0, 2, 3}, grad_bias);
}

}  // namespace tandem::cuda
