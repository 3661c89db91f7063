#include "parallel/stream_order.h"

#if TANDEM_WITH_CUDA
#include "engine/cuda/stream.h"
#endif

namespace tandem::parallel {

StreamRef current_stream_of(Device device) {
#if TANDEM_WITH_CUDA
  if (device.is_cuda()) return {device, cuda::current_stream(device.index)};
#endif
  return {device, nullptr};
}

void current_stream_wait_for(const StreamRef& producer) {
#if TANDEM_WITH_CUDA
  if (!producer.device.is_cuda()) return;
  const int index = producer.device.index;
  cuda::stream_wait_stream(cuda::current_stream(index), index,
                           static_cast<cudaStream_t>(producer.stream), index);
#else
  (void)producer;
#endif
}

}  // namespace tandem::parallel
