#pragma once
/// Memory format: the order in which a 4-D (N, C, H, W) tensor's elements lie in memory.
/// The logical shape never changes; only the strides do, as in PyTorch:
///   Contiguous    (N, C, H, W) row-major: strides (C*H*W, H*W, W, 1)
///   ChannelsLast  NHWC in memory:         strides (H*W*C, 1, W*C, C)
///
/// Note [Memory formats]: a format is read off the strides (Tensor::memory_format()), never
/// stored beside them, so views, slices along N and device moves keep it for free. Ops follow
/// PyTorch's rule: the output of an op has the format of its (channels-last) input, and so do
/// the gradients autograd hands back. CPU convolution, batch norm and pooling then run oneDNN on
/// the `nhwc` layout with no reorder between layers (Note [oneDNN layouts]); elementwise
/// kernels see a channels-last tensor through its NHWC view, which is contiguous
/// (ops::kernel_view). A format is not a property of a file: checkpoints hold NCHW values.

#include <string>

#include "engine/shape.h"

namespace tandem {

enum class MemoryFormat { Contiguous, ChannelsLast };

/// "contiguous" or "channels_last" (PyTorch's spelling).
const char* memory_format_name(MemoryFormat format);

/// "channels_last" (or "channels-last", "nhwc") or "contiguous" (or "nchw"); anything else
/// throws a one-line error naming the accepted values.
MemoryFormat parse_memory_format(const std::string& text);

/// Strides of a dense tensor of `shape` in `format`; ChannelsLast needs a 4-D shape.
Shape strides_for(const Shape& shape, MemoryFormat format);

/// True when (shape, strides) describe dense memory in `format`. Size-1 dimensions may have
/// any stride, as in is_contiguous().
bool is_dense_in(const Shape& shape, const Shape& strides, MemoryFormat format);

}  // namespace tandem
