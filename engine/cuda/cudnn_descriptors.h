#pragma once
// RAII owners of the cuDNN descriptors the backend uses (NCHW; float32 or bfloat16 data, float32
// compute). Destructors never throw.

#include <cudnn.h>

#include "engine/shape.h"

namespace tandem::cuda {

/// A 4-D NCHW tensor descriptor: (N, C, H, W), float32 unless said.
class TensorDescriptor {
 public:
  explicit TensorDescriptor(const Shape& nchw, cudnnDataType_t type = CUDNN_DATA_FLOAT);
  ~TensorDescriptor();
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return descriptor_; }

 private:
  cudnnTensorDescriptor_t descriptor_ = nullptr;
};

/// A KCRS filter descriptor: (K, C, R, S), float32 unless said.
class FilterDescriptor {
 public:
  explicit FilterDescriptor(const Shape& kcrs, cudnnDataType_t type = CUDNN_DATA_FLOAT);
  ~FilterDescriptor();
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return descriptor_; }

 private:
  cudnnFilterDescriptor_t descriptor_ = nullptr;
};

/// A 2-D cross-correlation (PyTorch's convolution) with float32 accumulation, whatever the
/// data type (CUDNN_DATA_FLOAT compute: cuDNN's PSEUDO_BFLOAT16 configuration for bfloat16).
class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor(int64_t stride, int64_t padding);
  ~ConvolutionDescriptor();
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  cudnnConvolutionDescriptor_t get() const { return descriptor_; }
  void set_math_type(cudnnMathType_t math_type);

 private:
  cudnnConvolutionDescriptor_t descriptor_ = nullptr;
};

}  // namespace tandem::cuda
