// A fake libcudnn for the CUDA backend on the fake CUDA runtime (Note [Fake CUDA runtime]): the
// functions engine/cuda calls, declared extern "C" by cudnn.h, so these definitions replace the
// real library at link time. Handles and descriptors are opaque numbers; a handle remembers its
// stream (cudnnSetStream). Batch norm is modelled: each call is traced with the arguments that
// matter and queues one work item on the handle's stream, as cuDNN's kernels would, e.g.
//   cudnnBatchNormalizationForwardTraining "factor 0.1 running_mean 1099511628288 running_var
//   1099511629312 on S1 of cuda:0"
// (the running statistics' addresses, or 0). Convolution is not: its calls are traced and fail
// with CUDNN_STATUS_NOT_SUPPORTED, which the backend reports as a cuDNN error.

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <sstream>
#include <string>

#include "tests/support/fake_cuda/fake_cuda_state.h"

using tandem::fake_cuda::detail::enter;
using tandem::fake_cuda::detail::queue_kernel;
using tandem::fake_cuda::detail::State;
using tandem::fake_cuda::detail::state;

namespace {

struct Handles {
  std::mutex mutex;
  uintptr_t next = 0xC0000;
  std::map<uintptr_t, cudaStream_t> streams;  ///< of each cuDNN handle
};

Handles& handles() {
  static auto* instance = new Handles;  // never destroyed (Note [Handle pools])
  return *instance;
}

template <typename Opaque>
Opaque new_handle() {
  Handles& h = handles();
  std::lock_guard lock(h.mutex);
  h.next += 0x10;
  return reinterpret_cast<Opaque>(h.next);
}

cudaStream_t stream_of(cudnnHandle_t handle) {
  Handles& h = handles();
  std::lock_guard lock(h.mutex);
  const auto it = h.streams.find(reinterpret_cast<uintptr_t>(handle));
  return it == h.streams.end() ? nullptr : it->second;
}

std::string address(const void* p) {
  return std::to_string(reinterpret_cast<uintptr_t>(p));
}

// Traces `function` with `what`; queues its work on the handle's stream when `queues`.
cudnnStatus_t call(const char* function, cudnnHandle_t handle, const std::string& what,
                   bool queues) {
  const cudaStream_t stream = handle != nullptr ? stream_of(handle) : nullptr;
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (enter(s, function, what) != cudaSuccess) return CUDNN_STATUS_EXECUTION_FAILED;
  if (!queues) return CUDNN_STATUS_SUCCESS;
  return queue_kernel(s, stream, what) == cudaSuccess ? CUDNN_STATUS_SUCCESS
                                                      : CUDNN_STATUS_EXECUTION_FAILED;
}

cudnnStatus_t unsupported(const char* function) {
  call(function, nullptr, "not modelled by the fake cuDNN", false);
  return CUDNN_STATUS_NOT_SUPPORTED;
}

}  // namespace

extern "C" {

// --- library, handles, descriptors

size_t cudnnGetCudartVersion() {
  return CUDART_VERSION;
}

const char* cudnnGetErrorString(cudnnStatus_t status) {
  return status == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS" : "fake cuDNN error";
}

void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (max_size > 0) message[0] = '\0';
}

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  *handle = new_handle<cudnnHandle_t>();
  return call("cudnnCreate", nullptr, address(*handle), false);
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  {
    Handles& h = handles();
    std::lock_guard lock(h.mutex);
    h.streams[reinterpret_cast<uintptr_t>(handle)] = stream;
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* descriptor) {
  *descriptor = new_handle<cudnnTensorDescriptor_t>();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t) {
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t, cudnnTensorFormat_t,
                                         cudnnDataType_t, int, int, int, int) {
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* descriptor) {
  *descriptor = new_handle<cudnnFilterDescriptor_t>();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t) {
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t, cudnnDataType_t,
                                         cudnnTensorFormat_t, int, int, int, int) {
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* descriptor) {
  *descriptor = new_handle<cudnnConvolutionDescriptor_t>();
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t) {
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t, int, int, int, int, int,
                                              int, cudnnConvolutionMode_t, cudnnDataType_t) {
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t, cudnnMathType_t) {
  return CUDNN_STATUS_SUCCESS;
}

// --- batch norm

cudnnStatus_t cudnnBatchNormalizationForwardTraining(
    cudnnHandle_t handle, cudnnBatchNormMode_t, const void*, const void*,
    const cudnnTensorDescriptor_t, const void*, const cudnnTensorDescriptor_t, void*,
    const cudnnTensorDescriptor_t, const void*, const void*, double factor, void* running_mean,
    void* running_var, double epsilon, void* save_mean, void* save_inv_variance) {
  std::ostringstream what;
  what << "factor " << factor << " running_mean " << address(running_mean) << " running_var "
       << address(running_var) << " eps " << epsilon;
  if (save_mean == nullptr || save_inv_variance == nullptr) what << " without saved statistics";
  return call("cudnnBatchNormalizationForwardTraining", handle, what.str(), true);
}

cudnnStatus_t cudnnBatchNormalizationForwardInference(
    cudnnHandle_t handle, cudnnBatchNormMode_t, const void*, const void*,
    const cudnnTensorDescriptor_t, const void*, const cudnnTensorDescriptor_t, void*,
    const cudnnTensorDescriptor_t, const void*, const void*, const void*, const void*, double) {
  return call("cudnnBatchNormalizationForwardInference", handle, "", true);
}

cudnnStatus_t cudnnBatchNormalizationBackward(
    cudnnHandle_t handle, cudnnBatchNormMode_t, const void*, const void*, const void*, const void*,
    const cudnnTensorDescriptor_t, const void*, const cudnnTensorDescriptor_t, const void*,
    const cudnnTensorDescriptor_t, void*, const cudnnTensorDescriptor_t, const void*, void*, void*,
    double, const void* save_mean, const void* save_inv_variance) {
  return call(
      "cudnnBatchNormalizationBackward", handle,
      "save_mean " + address(save_mean) + " save_inv_variance " + address(save_inv_variance), true);
}

// --- convolution: not modelled

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, const cudnnTensorDescriptor_t,
                                                     const cudnnFilterDescriptor_t,
                                                     const cudnnConvolutionDescriptor_t,
                                                     const cudnnTensorDescriptor_t, const int, int*,
                                                     cudnnConvolutionFwdAlgoPerf_t*) {
  return unsupported("cudnnGetConvolutionForwardAlgorithm_v7");
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t, const cudnnFilterDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnConvolutionDescriptor_t, const cudnnTensorDescriptor_t, const int, int*,
    cudnnConvolutionBwdDataAlgoPerf_t*) {
  return unsupported("cudnnGetConvolutionBackwardDataAlgorithm_v7");
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t, const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnConvolutionDescriptor_t, const cudnnFilterDescriptor_t, const int, int*,
    cudnnConvolutionBwdFilterAlgoPerf_t*) {
  return unsupported("cudnnGetConvolutionBackwardFilterAlgorithm_v7");
}
cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t, const cudnnTensorDescriptor_t, const void*, const cudnnFilterDescriptor_t,
    const void*, const cudnnConvolutionDescriptor_t, const cudnnTensorDescriptor_t, void*,
    const int, int*, cudnnConvolutionFwdAlgoPerf_t*, void*, size_t) {
  return unsupported("cudnnFindConvolutionForwardAlgorithmEx");
}
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t, const cudnnFilterDescriptor_t, const void*, const cudnnTensorDescriptor_t,
    const void*, const cudnnConvolutionDescriptor_t, const cudnnTensorDescriptor_t, void*,
    const int, int*, cudnnConvolutionBwdDataAlgoPerf_t*, void*, size_t) {
  return unsupported("cudnnFindConvolutionBackwardDataAlgorithmEx");
}
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t, const cudnnTensorDescriptor_t, const void*, const cudnnTensorDescriptor_t,
    const void*, const cudnnConvolutionDescriptor_t, const cudnnFilterDescriptor_t, void*,
    const int, int*, cudnnConvolutionBwdFilterAlgoPerf_t*, void*, size_t) {
  return unsupported("cudnnFindConvolutionBackwardFilterAlgorithmEx");
}
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t, const cudnnTensorDescriptor_t,
                                                      const cudnnFilterDescriptor_t,
                                                      const cudnnConvolutionDescriptor_t,
                                                      const cudnnTensorDescriptor_t,
                                                      cudnnConvolutionFwdAlgo_t, size_t*) {
  return unsupported("cudnnGetConvolutionForwardWorkspaceSize");
}
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t,
                                                           const cudnnFilterDescriptor_t,
                                                           const cudnnTensorDescriptor_t,
                                                           const cudnnConvolutionDescriptor_t,
                                                           const cudnnTensorDescriptor_t,
                                                           cudnnConvolutionBwdDataAlgo_t, size_t*) {
  return unsupported("cudnnGetConvolutionBackwardDataWorkspaceSize");
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t, const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnConvolutionDescriptor_t, const cudnnFilterDescriptor_t,
    cudnnConvolutionBwdFilterAlgo_t, size_t*) {
  return unsupported("cudnnGetConvolutionBackwardFilterWorkspaceSize");
}
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t, const void*, const cudnnTensorDescriptor_t,
                                      const void*, const cudnnFilterDescriptor_t, const void*,
                                      const cudnnConvolutionDescriptor_t, cudnnConvolutionFwdAlgo_t,
                                      void*, size_t, const void*, const cudnnTensorDescriptor_t,
                                      void*) {
  return unsupported("cudnnConvolutionForward");
}
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t, const void*,
                                           const cudnnFilterDescriptor_t, const void*,
                                           const cudnnTensorDescriptor_t, const void*,
                                           const cudnnConvolutionDescriptor_t,
                                           cudnnConvolutionBwdDataAlgo_t, void*, size_t,
                                           const void*, const cudnnTensorDescriptor_t, void*) {
  return unsupported("cudnnConvolutionBackwardData");
}
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t, const void*,
                                             const cudnnTensorDescriptor_t, const void*,
                                             const cudnnTensorDescriptor_t, const void*,
                                             const cudnnConvolutionDescriptor_t,
                                             cudnnConvolutionBwdFilterAlgo_t, void*, size_t,
                                             const void*, const cudnnFilterDescriptor_t, void*) {
  return unsupported("cudnnConvolutionBackwardFilter");
}

}  // extern "C"
