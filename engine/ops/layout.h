#pragma once
/// Views that let layout-agnostic kernels (elementwise, copy, fill, SGD) run on channels-last
/// tensors (Note [Memory formats]). No autograd: these are for op front-ends and backends.

#include "engine/tensor.h"

namespace tandem::ops {

/// The (N, H, W, C) view of a 4-D (N, C, H, W) tensor: the same memory, dims permuted. It is
/// contiguous exactly when the tensor is channels-last.
Tensor nhwc_view(const Tensor& t);

/// A contiguous view of a dense tensor in its own memory order: the tensor itself when it is
/// row-major, its NHWC view when it is channels-last. Two tensors of one shape and format give
/// views of one shape whose elements pair up as the tensors' do.
Tensor kernel_view(const Tensor& t);

/// A view of the contiguous 1-D `flat` as a dense tensor of `shape` in `format`.
Tensor dense_view(const Tensor& flat, const Shape& shape, MemoryFormat format);

/// ChannelsLast when any defined 4-D input is channels-last (PyTorch's rule for conv and
/// elementwise ops), else Contiguous.
MemoryFormat format_of_inputs(std::initializer_list<const Tensor*> inputs);

/// The format `device`'s kernels compute in when the op's result should be in `wanted`:
/// `wanted` where the backend takes channels-last tensors, else Contiguous (the front-end then
/// converts explicitly; Backend::channels_last_kernels()).
MemoryFormat kernel_format(Device device, MemoryFormat wanted);

/// The format a convolutional network trains fastest in on `device`: ChannelsLast where the
/// backend has channels-last kernels (the CPU: docs/benchmarks.md), else Contiguous.
MemoryFormat preferred_memory_format(Device device);

}  // namespace tandem::ops
