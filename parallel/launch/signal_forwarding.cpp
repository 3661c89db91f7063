#include "parallel/launch/signal_forwarding.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "engine/error.h"

namespace tandem::parallel {
namespace {

// SIGINT/SIGTERM handlers can only do async-signal-safe work, so they
// write the signal number into a pipe that the supervision loop polls. The pipe's write end is
// the one piece of process-wide state here, as signal handlers leave no other choice.
std::atomic<int> signal_pipe_write{-1};

void on_signal(int sig) {
  // The handler runs between any two instructions of the interrupted code, which may be about to
  // read errno: a failed write (the pipe full of unread signals) must not change it.
  const int saved_errno = errno;
  const int fd = signal_pipe_write.load();
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (fd >= 0) [[maybe_unused]]
    ssize_t ignored = ::write(fd, &byte, 1);
  errno = saved_errno;
}

}  // namespace

SignalForwarding::SignalForwarding() {
  int fds[2];
  TANDEM_CHECK(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0,
               "[tandem-run] pipe failed: ", std::strerror(errno));
  read_ = net::Socket(fds[0]);
  write_ = net::Socket(fds[1]);
  int expected = -1;
  TANDEM_CHECK(signal_pipe_write.compare_exchange_strong(expected, write_.fd()),
               "[tandem-run] launch() is already running in this process");
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
}

SignalForwarding::~SignalForwarding() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  signal_pipe_write.store(-1);
}

std::vector<int> SignalForwarding::take() {
  std::vector<int> out;
  unsigned char byte;
  while (::read(read_.fd(), &byte, 1) == 1) out.push_back(byte);
  return out;
}

}  // namespace tandem::parallel
