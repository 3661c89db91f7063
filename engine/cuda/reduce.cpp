// Reductions: sums over any set of dims and the row argmax (kernels in reduce.cu).

#include <algorithm>

#include "engine/cuda/caching_allocator.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/on_device.h"

namespace tandem::cuda {
namespace {

void push_dim(kernels::StridedLayout& layout, int64_t size, int64_t stride) {
  TANDEM_CHECK(layout.rank < kernels::kMaxDims, "[sum] more than ", kernels::kMaxDims,
               " alternating kept and reduced dims are not supported");
  layout.size[layout.rank] = size;
  layout.stride[layout.rank] = stride;
  ++layout.rank;
}

// Splits the dims of a contiguous input into kept and reduced ones, merging neighbours of the
// same kind (their strides stay valid because the input is contiguous).
kernels::ReduceLayout reduce_layout(const Shape& shape, const std::vector<int64_t>& dims) {
  const Shape strides = contiguous_strides(shape);
  kernels::ReduceLayout layout;
  int previous = -1;  // 0: kept, 1: reduced
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(i)) != dims.end();
    kernels::StridedLayout& target = reduced ? layout.reduced : layout.kept;
    if (previous == static_cast<int>(reduced)) {
      target.size[target.rank - 1] *= shape[i];
      target.stride[target.rank - 1] = strides[i];
    } else {
      push_dim(target, shape[i], strides[i]);
    }
    previous = static_cast<int>(reduced);
    (reduced ? layout.reduce_count : layout.outputs) *= shape[i];
  }
  return layout;
}

}  // namespace

void CudaBackend::sum(const Tensor& in, const std::vector<int64_t>& dims, Tensor& out) {
  OnDevice on(out, "sum");
  if (out.numel() == 0) return;
  if (in.numel() == 0) {
    fill(out, 0.0);
    return;
  }
  const kernels::ReduceLayout layout = reduce_layout(in.shape(), dims);
  const int sm_count = device_properties(on.index).multiProcessorCount;
  const size_t workspace_bytes = kernels::sum_workspace_bytes(layout, sm_count);
  // Freed at the end of the call, but only reused by work queued after the kernels: stream order.
  const DeviceBuffer workspace(on.index, workspace_bytes);
  kernels::sum(in.data<float>(), layout, sm_count, workspace.data(), out.data<float>(), on.stream);
}

void CudaBackend::argmax_rows(const Tensor& in, Tensor& out) {
  OnDevice on(out, "argmax");
  kernels::argmax_rows(in.data<float>(), in.size(0), in.size(1), out.data<int64_t>(), on.stream);
}

}  // namespace tandem::cuda
