#include "engine/upload.h"

#include "engine/error.h"
#include "engine/ops/factory.h"

namespace tandem {
namespace {

class ReadyUpload final : public PendingUpload {
 public:
  explicit ReadyUpload(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {}
  std::vector<Tensor> wait() override { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
};

// CPU devices share host memory: staging is ordinary memory and the copy happens at once.
class CpuUploadStream final : public UploadStream {
 public:
  explicit CpuUploadStream(Device device) : device_(device) {}
  Device device() const override { return device_; }

  Tensor empty_host(const Shape& shape, DType dtype) const override {
    return empty(shape, {.dtype = dtype});
  }

  std::unique_ptr<PendingUpload> upload(const std::vector<Tensor>& host_tensors) override {
    detail::check_host_tensors(host_tensors);
    std::vector<Tensor> copies;
    copies.reserve(host_tensors.size());
    for (const Tensor& host : host_tensors) copies.push_back(host.to(device_));
    return std::make_unique<ReadyUpload>(std::move(copies));
  }

 private:
  Device device_;
};

}  // namespace

std::unique_ptr<UploadStream> UploadStream::create(Device device) {
  if (device.is_cuda()) return detail::make_cuda_upload_stream(device.index);
  return std::make_unique<CpuUploadStream>(device);
}

namespace detail {

void check_host_tensors(const std::vector<Tensor>& host_tensors) {
  for (const Tensor& host : host_tensors) {
    TANDEM_CHECK(host.defined() && host.device().is_cpu() && host.is_contiguous(),
                 "[upload] needs contiguous host tensors (got ",
                 host.defined() ? host.device().str() : std::string("an undefined tensor"), ")");
  }
}

}  // namespace detail
}  // namespace tandem
