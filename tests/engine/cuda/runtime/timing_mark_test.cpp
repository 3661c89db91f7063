// CUDA timing marks on the fake CUDA runtime (engine/cuda/runtime/timing_mark.h, Note [Timing
// marks]): an event with timing recorded on the calling thread's current stream, whose reading
// waits for the device only when it must, and counts that wait (Note [Counting device
// synchronisations]).

#include <string>
#include <vector>

#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/cuda/runtime/timing_mark.h"
#include "engine/device_syncs.h"
#include "tests/engine/cuda/runtime/fake_cuda_fixture.h"
#include "tests/support/error_message.h"

namespace tandem::cuda {
namespace {

using fake_cuda::calls_to;
using fake_cuda::details_of;
using tandem::testing::contains;
using tandem::testing::error_message;

using CudaHostTimingMark = fake_cuda::FakeCudaTest;

TEST_F(CudaHostTimingMark, RecordsOnTheCurrentStreamWithoutWaiting) {
  const Stream side = Stream::create(1);
  std::unique_ptr<TimingMark> on_default = mark_time(0);
  std::unique_ptr<TimingMark> on_side;
  {
    const StreamGuard guard(side);
    on_side = mark_time(1);
  }
  const std::vector<std::string> records = details_of("cudaEventRecord");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_TRUE(contains(records[0], "of cuda:0 on")) << records[0];
  EXPECT_TRUE(contains(records[1], "of cuda:1 on")) << records[1];
  EXPECT_NE(records[1].find("on S"), std::string::npos) << "on the side stream: " << records[1];
  EXPECT_TRUE(calls_to("cudaEventSynchronize").empty());
  EXPECT_TRUE(calls_to("cudaDeviceSynchronize").empty());
}

// A phase timed between two marks: reading it before the device has run the phase waits for the
// later mark (one counted wait); after the device has run it, reading costs no wait.
TEST_F(CudaHostTimingMark, ReadingWaitsOnlyForWorkNotYetRun) {
  const std::unique_ptr<TimingMark> start = mark_time(0);
  fake_cuda::launch(nullptr);  // the phase: a kernel on the legacy default stream of cuda:0
  const std::unique_ptr<TimingMark> end = mark_time(0);
  const int64_t syncs = device_sync_count();
  EXPECT_EQ(start->elapsed_ms(*end), 1.0);  // the fake's every elapsed time
  EXPECT_EQ(device_sync_count(), syncs + 1);
  EXPECT_EQ(calls_to("cudaEventSynchronize").size(), 1u);

  const std::unique_ptr<TimingMark> later = mark_time(0);
  fake_cuda::launch(nullptr);
  const std::unique_ptr<TimingMark> last = mark_time(0);
  fake_cuda::run(nullptr, 0);  // what a synchronisation after the timed loop does
  EXPECT_EQ(later->elapsed_ms(*last), 1.0);
  EXPECT_EQ(device_sync_count(), syncs + 1);
  EXPECT_EQ(calls_to("cudaEventSynchronize").size(), 1u);
}

TEST_F(CudaHostTimingMark, MarksOfTwoDevicesDoNotCompare) {
  const std::unique_ptr<TimingMark> zero = mark_time(0);
  const std::unique_ptr<TimingMark> one = mark_time(1);
  EXPECT_TRUE(contains(error_message([&] { zero->elapsed_ms(*one); }),
                       "[timing] a mark of cuda:0 compared with one of another device"));
}

}  // namespace
}  // namespace tandem::cuda
