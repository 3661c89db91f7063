// UploadStream (engine/upload.h, Note [Uploads]): staging memory and host→device uploads.

#include <gtest/gtest.h>

#include "engine/tandem.h"
#include "engine/upload.h"
#include "tests/support/cuda_skip.h"
#include "tests/support/error_message.h"

#if TANDEM_WITH_CUDA
#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/pinned_allocator.h"
#include "engine/cuda/runtime/stream.h"
#include "tests/support/cuda_busy_wait.h"
#endif

namespace tandem {
namespace {

using testing::error_message;

TEST(Upload, CpuDeviceGetsAnIndependentCopy) {
  const auto uploads = UploadStream::create(Device::cpu(1));
  EXPECT_EQ(uploads->device(), Device::cpu(1));
  Tensor host = uploads->empty_host({2, 3}, DType::Float32);
  EXPECT_EQ(host.device(), Device::cpu());
  host.fill_(4.0);
  Tensor labels = uploads->empty_host({2}, DType::Int64);
  labels.fill_(7.0);
  const std::vector<Tensor> copies = uploads->upload({host, labels})->wait();
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].device(), Device::cpu(1));
  EXPECT_EQ(copies[1].dtype(), DType::Int64);
  host.fill_(0.0);  // the upload is a copy, not a view
  EXPECT_EQ(copies[0].to_vector<float>(), std::vector<float>(6, 4.0f));
  EXPECT_EQ(copies[1].to_vector<int64_t>(), std::vector<int64_t>(2, 7));
}

TEST(Upload, RejectsWhatIsNotAHostTensor) {
  const auto uploads = UploadStream::create(Device::cpu(1));
  const std::string message = error_message([&] { uploads->upload({Tensor()}); });
  EXPECT_NE(message.find("[upload] needs contiguous host tensors (got an undefined tensor)"),
            std::string::npos)
      << message;
}

TEST(Upload, CudaWithoutACudaDeviceSaysWhy) {
  if (cuda_available()) GTEST_SKIP() << "this machine has a CUDA device";
  const std::string message = error_message([] { UploadStream::create(Device::cuda(0)); });
  EXPECT_NE(message.find(cuda_unavailable_reason()), std::string::npos) << message;
}

TEST(UploadGpu, StagesInPinnedMemoryAndOrdersTheConsumerAfterTheCopy) {
  TANDEM_SKIP_WITHOUT_CUDA();
#if TANDEM_WITH_CUDA
  const auto uploads = UploadStream::create(Device::cuda(0));
  constexpr int64_t kElements = int64_t{1} << 20;
  const int64_t pinned_before = cuda::pinned_host_allocator().stats().allocation_count;
  std::vector<Tensor> sums;
  for (int i = 0; i < 20; ++i) {
    Tensor host = uploads->empty_host({kElements}, DType::Float32);
    host.fill_(static_cast<double>(i));
    Tensor on_device = uploads->upload({host})->wait()[0];
    // The consumer's stream is busy when the tensor is dropped below: without the event wait and
    // record_stream, the next upload could overwrite its block before sum() reads it.
    cuda::busy_wait(cuda::current_stream(0), 0, 2.0);
    sums.push_back(sum(on_device));
  }
  for (int i = 0; i < 20; ++i)
    EXPECT_FLOAT_EQ(static_cast<float>(sums[i].item()), static_cast<float>(i) * kElements)
        << "upload " << i;
  EXPECT_GT(cuda::pinned_host_allocator().stats().allocation_count, pinned_before);
#endif
}

}  // namespace
}  // namespace tandem
