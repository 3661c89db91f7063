#include "engine/cuda/cudnn_descriptors.h"

#include <climits>

#include "engine/cuda/cudnn_check.h"
#include "engine/cuda/runtime/cuda_check.h"

namespace tandem::cuda {
namespace {

int to_int(int64_t value, const char* what) {
  TANDEM_CHECK(value >= 0 && value <= INT_MAX, "[cudnn] ", what, " ", value,
               " does not fit cuDNN's int");
  return static_cast<int>(value);
}

}  // namespace

TensorDescriptor::TensorDescriptor(const Shape& nchw, cudnnDataType_t type) {
  TANDEM_CHECK(nchw.size() == 4, "[cudnn] tensor descriptors are 4-D, got ", shape_str(nchw));
  const int n = to_int(nchw[0], "size"), c = to_int(nchw[1], "size");
  const int h = to_int(nchw[2], "size"), w = to_int(nchw[3], "size");
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&descriptor_));
  const cudnnStatus_t status =
      cudnnSetTensor4dDescriptor(descriptor_, CUDNN_TENSOR_NCHW, type, n, c, h, w);
  if (status != CUDNN_STATUS_SUCCESS) cudnnDestroyTensorDescriptor(descriptor_);
  CUDNN_CHECK(status);
}

TensorDescriptor::~TensorDescriptor() {
  cudnnDestroyTensorDescriptor(descriptor_);
}

FilterDescriptor::FilterDescriptor(const Shape& kcrs, cudnnDataType_t type) {
  TANDEM_CHECK(kcrs.size() == 4, "[cudnn] filter descriptors are 4-D, got ", shape_str(kcrs));
  const int k = to_int(kcrs[0], "size"), c = to_int(kcrs[1], "size");
  const int r = to_int(kcrs[2], "size"), s = to_int(kcrs[3], "size");
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&descriptor_));
  const cudnnStatus_t status =
      cudnnSetFilter4dDescriptor(descriptor_, type, CUDNN_TENSOR_NCHW, k, c, r, s);
  if (status != CUDNN_STATUS_SUCCESS) cudnnDestroyFilterDescriptor(descriptor_);
  CUDNN_CHECK(status);
}

FilterDescriptor::~FilterDescriptor() {
  cudnnDestroyFilterDescriptor(descriptor_);
}

ConvolutionDescriptor::ConvolutionDescriptor(int64_t stride, int64_t padding) {
  const int p = to_int(padding, "padding");
  const int s = to_int(stride, "stride");
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&descriptor_));
  const cudnnStatus_t status = cudnnSetConvolution2dDescriptor(
      descriptor_, p, p, s, s, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  if (status != CUDNN_STATUS_SUCCESS) cudnnDestroyConvolutionDescriptor(descriptor_);
  CUDNN_CHECK(status);
}

ConvolutionDescriptor::~ConvolutionDescriptor() {
  cudnnDestroyConvolutionDescriptor(descriptor_);
}

void ConvolutionDescriptor::set_math_type(cudnnMathType_t math_type) {
  CUDNN_CHECK(cudnnSetConvolutionMathType(descriptor_, math_type));
}

}  // namespace tandem::cuda
