// Memory ops: copies within a device, between devices and to and from the host; fill; casts.
//
// Note [Host copies]: a copy to the host waits for its stream before returning (the caller
// reads the data next: to_vector, item). A copy from pageable host memory returns once the
// driver has staged the source, so the caller may free or change it at once. A copy from pinned
// memory (cuda::empty_pinned) is truly asynchronous: record_stream() keeps the pinned block from
// being reused before the copy has run, but the caller must not overwrite it until then.

#include <cstring>

#include "engine/backend/collapse_dims.h"
#include "engine/cuda/activation_type.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/on_device.h"
#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/pinned_allocator.h"
#include "engine/host_reads.h"
#include "engine/ops/factory.h"

namespace tandem::cuda {
namespace {

// `value` as dtype's bit pattern in the low bytes; converted as the CPU backend's fill converts it,
// so both fill the same bits.
uint64_t fill_bits(DType dtype, double value) {
  uint64_t bits = 0;
  switch (dtype) {
    case DType::Float32: {
      const auto v = static_cast<float>(value);
      std::memcpy(&bits, &v, sizeof(v));
      break;
    }
    case DType::Int64: {
      const auto v = static_cast<int64_t>(value);
      std::memcpy(&bits, &v, sizeof(v));
      break;
    }
    case DType::UInt8: bits = static_cast<uint8_t>(value); break;
    case DType::BFloat16: bits = BFloat16(static_cast<float>(value)).bits; break;
    case DType::Float16: bits = Float16(static_cast<float>(value)).bits; break;
  }
  return bits;
}

// The kernel's fixed-size copy of the view's collapsed dims (Note [Collapsing dims]).
kernels::StridedLayout strided_layout(const Tensor& tensor) {
  const CollapsedDims dims = collapse_dims(tensor.shape(), {tensor.strides()}, "copy");
  check_collapsed_rank(dims, kernels::kMaxDims, tensor.shape(), "copy");
  kernels::StridedLayout layout;
  layout.rank = static_cast<int>(dims.rank());
  for (size_t d = 0; d < dims.rank(); ++d) {
    layout.size[d] = dims.shape[d];
    layout.stride[d] = dims.strides[0][d];
  }
  return layout;
}

// Gathers a strided CUDA tensor into the contiguous `dst` on the same device.
void gather(const Tensor& src, Tensor& dst) {
  OnDevice on(src, "copy");
  kernels::copy_strided(src.data_ptr(), strided_layout(src), dst.data_ptr(),
                        static_cast<int>(dtype_size(src.dtype())), on.stream);
}

Tensor contiguous_on_device(const Tensor& src) {
  if (src.is_contiguous()) return src;
  Tensor out = empty(src.shape(), {.dtype = src.dtype(), .device = src.device()});
  gather(src, out);
  return out;
}

void copy_host_to_device(const Tensor& src, Tensor& dst) {
  const Tensor host = src.is_contiguous() ? src : src.detach().contiguous();
  OnDevice on(dst, "copy");
  CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), host.data_ptr(), host.nbytes(), cudaMemcpyHostToDevice,
                             on.stream));
  // Note [Host copies]: only a pinned source can still be read after the call returns.
  pinned_host_allocator().record_stream(host.storage()->data(), on.stream, on.index);
}

void copy_device_to_host(const Tensor& src, Tensor& dst) {
  tandem::detail::count_host_read();  // Note [Counting host reads]
  const Tensor device_src = contiguous_on_device(src);
  OnDevice on(device_src, "copy");
  CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), device_src.data_ptr(), device_src.nbytes(),
                             cudaMemcpyDeviceToHost, on.stream));
  CUDA_CHECK(cudaStreamSynchronize(on.stream));
}

// Between two devices: the copy runs on the source device's current stream, after the
// destination's stream has finished with the destination memory, and the destination's stream
// waits for the copy before its next use. Neither host nor device synchronises.
void copy_between_devices(const Tensor& src, Tensor& dst) {
  const Tensor device_src = contiguous_on_device(src);
  const int from = src.device().index;
  const int to = dst.device().index;
  const cudaStream_t from_stream = current_stream(from);
  const cudaStream_t to_stream = current_stream(to);
  enable_peer_access(from, to);  // once per pair; otherwise the copy is staged through the host
  stream_wait_stream(from_stream, from, to_stream, to);
  {
    DeviceGuard guard(from);
    CUDA_CHECK(cudaMemcpyPeerAsync(dst.data_ptr(), to, device_src.data_ptr(), from,
                                   device_src.nbytes(), from_stream));
  }
  stream_wait_stream(to_stream, to, from_stream, from);
}

}  // namespace

void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  TANDEM_CHECK(dst.is_contiguous() && src.numel() == dst.numel() && src.dtype() == dst.dtype(),
               "[copy] needs a contiguous destination of the same size and dtype, got ",
               shape_str(src.shape()), " ", dtype_name(src.dtype()), " -> ", shape_str(dst.shape()),
               " ", dtype_name(dst.dtype()));
  if (src.numel() == 0) return;
  const Device from = src.device();
  const Device to = dst.device();
  if (from.is_cpu() && to.is_cpu()) return backend_for(from).copy(src, dst);
  if (from.is_cpu()) return copy_host_to_device(src, dst);
  if (to.is_cpu()) return copy_device_to_host(src, dst);
  if (from != to) return copy_between_devices(src, dst);
  if (!src.is_contiguous()) return gather(src, dst);
  if (src.data_ptr() == dst.data_ptr()) return;
  OnDevice on(dst, "copy");
  CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(), cudaMemcpyDeviceToDevice,
                             on.stream));
}

void CudaBackend::fill(Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  OnDevice on(dst, "fill");
  const uint64_t bits = fill_bits(dst.dtype(), value);
  kernels::fill(dst.data_ptr(), dst.numel(), static_cast<int>(dtype_size(dst.dtype())), bits,
                on.stream);
}

void CudaBackend::cast(const Tensor& src, Tensor& dst) {
  TANDEM_CHECK(src.device() == dst.device() && src.numel() == dst.numel(),
               "[cast] needs two tensors of the same size on one device, got ", src.device(),
               " and ", dst.device());
  OnDevice on(dst, "cast");
  kernels::cast(src.data_ptr(), src.dtype(), dst.data_ptr(), dst.dtype(), src.numel(), on.stream);
}

}  // namespace tandem::cuda
