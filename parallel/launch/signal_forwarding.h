#pragma once
/// SIGINT and SIGTERM, turned into bytes on a pipe that tandem-run's supervision loop polls
/// beside the workers' output, so that the launcher forwards them to the workers (launcher.h).

#include <csignal>
#include <vector>

#include "parallel/comm/socket.h"

namespace tandem::parallel {

/// Installs the handlers for its lifetime (one at a time per process) and restores the previous
/// ones afterwards.
class SignalForwarding {
 public:
  SignalForwarding();
  ~SignalForwarding();
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

  /// The pipe's read end, readable when a signal has arrived.
  int fd() const { return read_.fd(); }
  /// The signals received since the last call.
  std::vector<int> take();

 private:
  net::Socket read_, write_;
  struct sigaction previous_int_ {
  }, previous_term_{};
};

}  // namespace tandem::parallel
