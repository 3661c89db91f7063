#pragma once
/// Host→device uploads for input pipelines: staging memory and copies that overlap compute.
///
/// Note [Uploads]: a batch built on the host reaches a CUDA device fastest when
/// (1) it is built in page-locked (pinned) memory, so the DMA engine reads it directly and the
///     copy is truly asynchronous, and
/// (2) the copy runs on a stream of its own, so it overlaps the kernels of the step before;
/// the consumer then orders its compute stream after the copy with an event, never with a
/// device-wide synchronisation, and announces the tensors' use on its stream (record_stream) so
/// the caching allocator does not hand their memory to the copy stream again too early. This is
/// what PyTorch's pin_memory=True plus a side-stream prefetcher (NVIDIA's data_prefetcher) do.
/// For CPU devices, staging memory is ordinary memory and an upload is a plain copy.
///
///   auto uploads = UploadStream::create(Device::cuda(0));
///   Tensor host = uploads->empty_host({128, 3, 32, 32}, DType::Float32);  // pinned
///   ... fill host (any thread) ...
///   auto pending = uploads->upload({host});  // returns at once; copy queued on the copy stream
///   ... later, on the consumer's thread ...
///   Tensor images = pending->wait()[0];      // its current stream waits for the copy

#include <memory>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"

namespace tandem {

/// Copies queued by UploadStream::upload(); the device tensors become usable through wait().
class PendingUpload {
 public:
  virtual ~PendingUpload() = default;
  /// The device tensors, in upload() order, safe to use in work the calling thread queues from
  /// now on: on CUDA its current stream waits for the copies (the host does not block).
  virtual std::vector<Tensor> wait() = 0;
};

class UploadStream {
 public:
  /// For a CUDA device: pinned staging memory and a copy stream of its own. For a CPU device:
  /// ordinary memory and synchronous copies (cpu:k devices share host memory).
  static std::unique_ptr<UploadStream> create(Device device);

  virtual ~UploadStream() = default;
  virtual Device device() const = 0;
  /// A contiguous host tensor that upload() copies from at full speed (pinned on CUDA). Do not
  /// change it after upload() until the upload has been waited for.
  virtual Tensor empty_host(const Shape& shape, DType dtype) const = 0;
  /// Queues copies of `host_tensors` (contiguous, on the CPU) to the device and returns without
  /// waiting for them. Thread-safe: several threads may upload at once.
  virtual std::unique_ptr<PendingUpload> upload(const std::vector<Tensor>& host_tensors) = 0;
};

namespace detail {
/// UploadStream::create() for CUDA devices; defined by engine/cuda, or by engine/no_cuda (throws).
std::unique_ptr<UploadStream> make_cuda_upload_stream(int device);
/// Checks upload()'s arguments: contiguous CPU tensors.
void check_host_tensors(const std::vector<Tensor>& host_tensors);
}  // namespace detail

}  // namespace tandem
