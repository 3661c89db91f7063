#include "parallel/launch/signal_forwarding.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>

namespace tandem::parallel {
namespace {

TEST(SignalForwarding, ASignalIsForwardedThroughThePipe) {
  SignalForwarding signals;
  ASSERT_EQ(std::raise(SIGTERM), 0);
  EXPECT_EQ(signals.take(), std::vector<int>{SIGTERM});
}

// The handler's write() fails once the pipe is full of unread signals; the code it interrupted
// must still find its own errno.
TEST(SignalForwarding, TheHandlerLeavesErrnoAsItFoundItEvenWhenItsWriteFails) {
  SignalForwarding signals;
  constexpr int kMoreThanAPipeHolds = 70000;  // a pipe holds 64 KiB unless resized
  for (int i = 0; i < kMoreThanAPipeHolds; ++i) ASSERT_EQ(std::raise(SIGTERM), 0);
  errno = ERANGE;
  ASSERT_EQ(std::raise(SIGTERM), 0);  // this write fails with EAGAIN inside the handler
  EXPECT_EQ(errno, ERANGE);
  EXPECT_LT(signals.take().size(), static_cast<size_t>(kMoreThanAPipeHolds));  // it was full
}

}  // namespace
}  // namespace tandem::parallel
