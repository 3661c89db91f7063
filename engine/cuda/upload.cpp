// UploadStream for CUDA devices (Note [Uploads] in engine/upload.h): pinned staging memory and a
// copy stream of its own; the consumer's stream waits for an event.
//
// Its place: the cuda/ root, built with the CUDA Backend, not runtime/ (tandem_cuda_runtime). An
// upload makes a device tensor and copies into it through the ops (engine/ops/factory.h: empty(),
// copy_()), which dispatch to the kernels, so it stands on the runtime and the kernels both; the
// runtime sits beneath the ops, is brought up and tested before the kernels and includes nothing
// of the kernel side (the layering test checks that), so an upload cannot live there. What it
// needs of the runtime (streams, events, the pinned allocator) it takes through runtime/'s
// headers, as the rest of this level does (docs/engine.md, the runtime apart from the kernels).

#include "engine/upload.h"

#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/pinned_allocator.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/ops/factory.h"

namespace tandem {
namespace {

class CudaPendingUpload final : public PendingUpload {
 public:
  CudaPendingUpload(int device, std::vector<Tensor> tensors, cuda::Event copied)
      : device_(device), tensors_(std::move(tensors)), copied_(std::move(copied)) {}

  std::vector<Tensor> wait() override {
    cuda::DeviceGuard guard(device_);
    const cudaStream_t consumer = cuda::current_stream(device_);
    CUDA_CHECK(cudaStreamWaitEvent(consumer, copied_.handle(), 0));
    // The blocks belong to the copy stream; without this, freeing a tensor after the step could
    // let the next upload overwrite it while the consumer's kernels still read it.
    for (const Tensor& tensor : tensors_) cuda::record_stream(tensor, consumer);
    return tensors_;
  }

 private:
  int device_;
  std::vector<Tensor> tensors_;
  cuda::Event copied_;
};

class CudaUploadStream final : public UploadStream {
 public:
  explicit CudaUploadStream(int device) : device_(device), copy_stream_(make_stream(device)) {}

  Device device() const override { return Device::cuda(device_); }

  Tensor empty_host(const Shape& shape, DType dtype) const override {
    // Pinned memory belongs to the device current at cudaHostAlloc: on a DataLoader worker (a
    // new thread, device 0) that would make a context on GPU 0 (Note [Device contexts]).
    const cuda::DeviceGuard guard(device_);
    return cuda::empty_pinned(shape, dtype);
  }

  std::unique_ptr<PendingUpload> upload(const std::vector<Tensor>& host_tensors) override {
    detail::check_host_tensors(host_tensors);
    cuda::DeviceGuard guard(device_);
    // Device memory is taken on the copy stream and the copies are queued there (the backend's
    // copy runs on the current stream); a pinned source is recorded as in use by the copy.
    cuda::StreamGuard on_copy_stream(copy_stream_);
    std::vector<Tensor> copies;
    copies.reserve(host_tensors.size());
    for (const Tensor& host : host_tensors) {
      Tensor copy = empty(host.shape(), {.dtype = host.dtype(), .device = device()});
      copy.copy_(host);
      copies.push_back(std::move(copy));
    }
    cuda::Event copied = cuda::Event::pooled(device_);
    copied.record(copy_stream_);
    return std::make_unique<CudaPendingUpload>(device_, std::move(copies), std::move(copied));
  }

 private:
  static cuda::Stream make_stream(int device) {
    cuda::check_device(device, "upload");
    cuda::DeviceGuard guard(device);
    return cuda::Stream::create(device);
  }

  int device_;
  cuda::Stream copy_stream_;
};

}  // namespace

namespace detail {

std::unique_ptr<UploadStream> make_cuda_upload_stream(int device) {
  return std::make_unique<CudaUploadStream>(device);
}

}  // namespace detail
}  // namespace tandem
