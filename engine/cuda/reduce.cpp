// Reductions: sums over any set of dims (float32 or bfloat16) and the row argmax (kernels in
// reduce.cu).

#include "engine/cuda/activation_type.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/kernels/reduce_layout.h"
#include "engine/cuda/on_device.h"
#include "engine/cuda/runtime/caching_allocator.h"

namespace tandem::cuda {

void CudaBackend::sum(const Tensor& in, const std::vector<int64_t>& dims, Tensor& out) {
  activation_type("sum", {&in, &out});  // one dtype, float32 or bfloat16
  sum_into(in, dims, out);
}

void sum_into(const Tensor& in, const std::vector<int64_t>& dims, Tensor& out) {
  OnDevice on(out, "sum");
  if (out.numel() == 0) return;
  if (in.numel() == 0) {
    backend().fill(out, 0.0);
    return;
  }
  const kernels::ReduceLayout layout = kernels::reduce_layout(in.shape(), dims);
  const int sm_count = device_properties(on.index).multiProcessorCount;
  const size_t workspace_bytes = kernels::sum_workspace_bytes(layout, sm_count);
  // Freed at the end of the call, but only reused by work queued after the kernels: stream order.
  const DeviceBuffer workspace(on.index, workspace_bytes);
  kernels::sum(in.data_ptr(), in.dtype(), layout, sm_count, workspace.data(), out.data_ptr(),
               out.dtype(), on.stream);
}

void CudaBackend::argmax_rows(const Tensor& in, Tensor& out) {
  OnDevice on(out, "argmax");
  kernels::argmax_rows(in.data<float>(), in.size(0), in.size(1), out.data<int64_t>(), on.stream);
}

}  // namespace tandem::cuda
