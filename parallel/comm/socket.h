#pragma once
/// TCP plumbing for the rendezvous store and the launcher: an owning socket handle, connect with
/// retries, listen, and length-prefixed frames with deadlines.
///
/// Note [Frames]: every message is a 4-byte big-endian length followed by that many bytes, so a
/// reader always knows where a message ends, and a peer that disconnects mid-message is told apart
/// from one that closed between messages. Frames larger than kMaxFrameBytes are refused, and a
/// frame's memory grows as its bytes arrive: a stray client (a port scanner, an HTTP probe, one
/// that announces a size and stalls) must not make the store allocate what it claims.
///
/// Every function throws tandem::Error whose message starts with `tag` (e.g. "[store]").

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::parallel::net {

using Clock = std::chrono::steady_clock;

/// Store messages are keys and small values (addresses, NCCL ids, Gloo's per-rank address lists:
/// tens of bytes per rank), so 16 MiB is far above any real one and bounds what a stray or
/// hostile client can make the store hold (far below memory: any connection may send one).
constexpr uint32_t kMaxFrameBytes = 16u << 20;

/// now + timeout, saturating at the clock's end instead of overflowing: a timeout of
/// milliseconds::max() means "no deadline", never one in the past.
Clock::time_point deadline_after(std::chrono::milliseconds timeout);

/// Owns one file descriptor; closes it on destruction.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { reset(); }
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset();
  /// Wakes any thread blocked reading this socket (it sees EOF); sending still works.
  void shutdown_read();

 private:
  int fd_ = -1;
};

/// Connects to host:port, retrying refused or unreachable attempts until `timeout` passes (the
/// server may not be up yet). On failure returns an invalid socket and the last reason in
/// `last_error`, so the caller can say what it was trying to reach.
Socket connect_with_retry(const std::string& host, int port, std::chrono::milliseconds timeout,
                          std::string& last_error);

/// Listens on host:port; an empty host means every interface (IPv6 and IPv4 where possible).
/// Port 0 picks a free port (see local_port). A busy port gives an error saying so.
Socket listen_on(std::string_view tag, const std::string& host, int port);

/// The port a bound socket got (useful after binding port 0).
int local_port(const Socket& socket);

/// The numeric IP address of this end of a connected socket ("10.0.0.2", "::1"): the address
/// of the interface this machine reaches the peer through.
std::string local_address(const Socket& socket);

/// The names of this machine's network interfaces that have an IP address, each once.
std::vector<std::string> interface_names();

/// The name of the network interface that holds `address` ("eth0"), or "" when none does.
std::string interface_with_address(const std::string& address);

/// Whether `host` resolves to loopback addresses only ("localhost", or a host name that
/// /etc/hosts maps to 127.0.1.1, as containers and cloud images often do). A name that does not
/// resolve counts too: other machines cannot reach us by it either.
bool resolves_to_loopback_only(const std::string& host);

/// Note [Store address]: where a store listens for a job's address `host`. A loopback address
/// (127.x, ::1, "localhost") stays on loopback: a one-machine job's store is not reachable from
/// the network (review S1). An address of this machine, by number or by a name that resolves to
/// one, is listened on alone. Every interface ("") otherwise: a name that maps to loopback only
/// here (Debian's /etc/hosts maps the machine's own name to 127.0.1.1) still names this machine to
/// the others through their resolver, and an address behind NAT is not this machine's.
std::string listen_host_for(const std::string& host);

/// Whether a socket can be bound to `host` here (it is one of this machine's addresses).
bool can_bind(const std::string& host);

/// Sends all of `bytes`; never raises SIGPIPE (a vanished peer is an error, not a dead process).
void send_all(std::string_view tag, const Socket& socket, std::string_view bytes);

/// Receives exactly n bytes, for protocols without frames. Throws when the peer closes the
/// connection first or `deadline` (if given) passes.
std::string receive_exactly(std::string_view tag, const Socket& socket, size_t n,
                            std::optional<Clock::time_point> deadline = {});

/// Sends one frame (Note [Frames]).
void send_frame(std::string_view tag, const Socket& socket, std::string_view payload);

/// Receives one frame. Returns nothing when the peer closed the connection between frames.
/// Throws on an error, on a peer that vanishes mid-frame, on an oversized frame, when
/// `deadline` (if given) passes first, or when a frame that has begun takes longer than
/// `rest_of_frame` to complete (a stalled peer). The payload grows as its bytes arrive, so an
/// announced size costs nothing until it is sent.
std::optional<std::string> receive_frame(
    std::string_view tag, const Socket& socket, std::optional<Clock::time_point> deadline = {},
    std::chrono::milliseconds rest_of_frame = std::chrono::milliseconds::max());

/// "250 ms", "5 s", "1.5 s": durations as error messages show them.
std::string format_duration(std::chrono::milliseconds duration);

}  // namespace tandem::parallel::net
