#include "parallel/comm/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/error.h"

namespace tandem::parallel::net {
namespace {

std::string errno_text(int error) {
  return std::strerror(error);
}

struct AddrInfoList {
  addrinfo* head = nullptr;
  ~AddrInfoList() {
    if (head != nullptr) freeaddrinfo(head);
  }
};

// Resolves host:port; returns the getaddrinfo error text, or "" on success.
std::string resolve(const std::string& host, int port, bool passive, AddrInfoList& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  const int rc =
      getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out.head);
  if (rc != 0) return "cannot resolve '" + host + "': " + gai_strerror(rc);
  return "";
}

void set_nonblocking(int fd, bool on) {
  const int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK));
}

// One connection attempt with its own deadline: a blocking connect() to an unreachable host can
// hang for minutes, longer than the caller's timeout.
Socket try_connect(const addrinfo& address, Clock::time_point deadline, std::string& error) {
  Socket socket(
      ::socket(address.ai_family, address.ai_socktype | SOCK_CLOEXEC, address.ai_protocol));
  if (!socket.valid()) {
    error = errno_text(errno);
    return {};
  }
  set_nonblocking(socket.fd(), true);
  if (::connect(socket.fd(), address.ai_addr, address.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      error = errno_text(errno);
      return {};
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd entry{socket.fd(), POLLOUT, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::max<int64_t>(left.count(), 1)));
    int status = ETIMEDOUT;
    socklen_t length = sizeof(status);
    if (ready > 0) getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &status, &length);
    if (status != 0) {
      error = errno_text(status);
      return {};
    }
  }
  set_nonblocking(socket.fd(), false);
  const int one = 1;
  setsockopt(socket.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return socket;
}

// Waits until fd is readable; false when the deadline passed first.
bool wait_readable(std::string_view tag, int fd, std::optional<Clock::time_point> deadline) {
  if (!deadline) return true;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd entry{fd, POLLIN, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (ready > 0) return true;
    TANDEM_CHECK(ready == 0 || errno == EINTR, tag, " poll failed: ", errno_text(errno));
  }
}

// Reads exactly n bytes. Returns the number read before a clean EOF (0..n-1), or n.
size_t read_exactly(std::string_view tag, const Socket& socket, char* data, size_t n,
                    std::optional<Clock::time_point> deadline) {
  size_t done = 0;
  while (done < n) {
    TANDEM_CHECK(wait_readable(tag, socket.fd(), deadline), tag,
                 " timed out waiting for a reply from the peer");
    const ssize_t got = ::recv(socket.fd(), data + done, n - done, 0);
    if (got == 0) return done;
    if (got < 0) {
      if (errno == EINTR) continue;
      TANDEM_FAIL(tag, " connection lost: ", errno_text(errno));
    }
    done += static_cast<size_t>(got);
  }
  return n;
}

}  // namespace

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.release();
  }
  return *this;
}

int Socket::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Socket::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdown_read() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RD);
}

Socket connect_with_retry(const std::string& host, int port, std::chrono::milliseconds timeout,
                          std::string& last_error) {
  const auto deadline = deadline_after(timeout);
  auto pause = std::chrono::milliseconds(20);
  while (true) {
    AddrInfoList addresses;
    last_error = resolve(host, port, /*passive=*/false, addresses);
    for (addrinfo* a = addresses.head; a != nullptr; a = a->ai_next) {
      Socket socket = try_connect(*a, deadline, last_error);
      if (socket.valid()) return socket;
    }
    const auto now = Clock::now();
    if (now >= deadline) return {};
    // Back off so that hundreds of ranks waiting for rank 0 do not hammer it; the last try is at
    // the deadline, so the whole timeout is waited (as the caller's error says), not up to a
    // pause less.
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(1000));
  }
}

Socket listen_on(std::string_view tag, const std::string& host, int port) {
  TANDEM_CHECK(port >= 0 && port <= 65535, tag, " port ", port, " is out of range 0..65535");
  AddrInfoList addresses;
  const std::string error = resolve(host, port, /*passive=*/true, addresses);
  TANDEM_CHECK(error.empty(), tag, " ", error);
  // With no host, prefer the IPv6 wildcard in dual-stack mode: it accepts IPv4 clients too, so
  // "localhost" works whichever family it resolves to.
  std::vector<addrinfo*> order;
  for (addrinfo* a = addresses.head; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET6)
      order.insert(order.begin(), a);
    else
      order.push_back(a);
  }
  int last = 0;
  for (addrinfo* a : order) {
    Socket socket(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!socket.valid()) continue;
    const int one = 1, zero = 0;
    // SO_REUSEADDR: a restarted job may reuse its port while old connections sit in TIME_WAIT.
    setsockopt(socket.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ai_family == AF_INET6) setsockopt(socket.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, 4);
    if (::bind(socket.fd(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(socket.fd(), 1024) == 0) {
      return socket;
    }
    last = errno;
    if (last == EADDRINUSE) break;
  }
  TANDEM_CHECK(last != EADDRINUSE, tag, " port ", port,
               " is already in use on this machine (another job, or an earlier run that has not "
               "exited); choose another port, or 0 for a free one");
  TANDEM_FAIL(tag, " cannot listen on ", host.empty() ? "*" : host, ":", port, ": ",
              errno_text(last));
}

int local_port(const Socket& socket) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length);
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
}

std::string local_address(const Socket& socket) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (getsockname(socket.fd(), reinterpret_cast<sockaddr*>(&address), &length) != 0) return "";
  char host[NI_MAXHOST] = {};
  if (getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host, sizeof(host), nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return "";
  }
  return host;
}

std::vector<std::string> interface_names() {
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return {};
  std::vector<std::string> names;
  for (ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    const int family = i->ifa_addr->sa_family;
    if ((family == AF_INET || family == AF_INET6) &&
        std::find(names.begin(), names.end(), i->ifa_name) == names.end()) {
      names.emplace_back(i->ifa_name);
    }
  }
  freeifaddrs(interfaces);
  return names;
}

std::string interface_with_address(const std::string& address) {
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return "";
  std::string name;
  for (ifaddrs* i = interfaces; i != nullptr && name.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    const socklen_t length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    char host[NI_MAXHOST] = {};
    if (getnameinfo(i->ifa_addr, length, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) == 0 &&
        address == host) {
      name = i->ifa_name;
    }
  }
  freeifaddrs(interfaces);
  return name;
}

bool resolves_to_loopback_only(const std::string& host) {
  AddrInfoList addresses;
  if (!resolve(host, 0, /*passive=*/false, addresses).empty()) return true;
  for (addrinfo* a = addresses.head; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr.s_addr);
      if ((ip >> 24) != 127) return false;  // all of 127.0.0.0/8 is loopback
    } else if (a->ai_family == AF_INET6) {
      const in6_addr& ip = reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
      if (!IN6_IS_ADDR_LOOPBACK(&ip)) return false;
    }
  }
  return true;
}

bool can_bind(const std::string& host) {
  AddrInfoList addresses;
  if (!resolve(host, 0, /*passive=*/false, addresses).empty()) return false;
  for (addrinfo* a = addresses.head; a != nullptr; a = a->ai_next) {
    Socket socket(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (socket.valid() && ::bind(socket.fd(), a->ai_addr, a->ai_addrlen) == 0) return true;
  }
  return false;
}

std::string listen_host_for(const std::string& host) {
  if (host.empty()) return host;
  if (host == "localhost") return "127.0.0.1";
  in_addr ip4{};
  in6_addr ip6{};
  const bool literal =
      inet_pton(AF_INET, host.c_str(), &ip4) == 1 || inet_pton(AF_INET6, host.c_str(), &ip6) == 1;
  if (resolves_to_loopback_only(host)) return literal ? host : "";
  return can_bind(host) ? host : "";
}

void send_all(std::string_view tag, const Socket& socket, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t sent =
        ::send(socket.fd(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    TANDEM_CHECK(sent > 0, tag, " connection lost while sending: ", errno_text(errno));
    done += static_cast<size_t>(sent);
  }
}

std::string receive_exactly(std::string_view tag, const Socket& socket, size_t n,
                            std::optional<Clock::time_point> deadline) {
  std::string bytes(n, '\0');
  TANDEM_CHECK(read_exactly(tag, socket, bytes.data(), n, deadline) == n, tag,
               " the peer closed the connection");
  return bytes;
}

void send_frame(std::string_view tag, const Socket& socket, std::string_view payload) {
  TANDEM_CHECK(payload.size() <= kMaxFrameBytes, tag, " message of ", payload.size(),
               " bytes is larger than the limit of ", kMaxFrameBytes);
  const uint32_t size = static_cast<uint32_t>(payload.size());
  const char header[4] = {static_cast<char>(size >> 24), static_cast<char>(size >> 16),
                          static_cast<char>(size >> 8), static_cast<char>(size)};
  std::string buffer(header, 4);
  buffer.append(payload);
  send_all(tag, socket, buffer);
}

Clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  const Clock::time_point now = Clock::now();
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now);
  return timeout >= left ? Clock::time_point::max() : now + timeout;
}

std::optional<std::string> receive_frame(std::string_view tag, const Socket& socket,
                                         std::optional<Clock::time_point> deadline,
                                         std::chrono::milliseconds rest_of_frame) {
  unsigned char header[4];
  // Between frames a peer may stay silent as long as `deadline` allows; once a frame has begun,
  // the rest must follow within rest_of_frame.
  if (read_exactly(tag, socket, reinterpret_cast<char*>(header), 1, deadline) == 0) {
    return std::nullopt;
  }
  const Clock::time_point started = deadline_after(rest_of_frame);
  const Clock::time_point rest = deadline ? std::min(*deadline, started) : started;
  const std::string incomplete = std::string(tag) + " connection closed in the middle of a message";
  TANDEM_CHECK(read_exactly(tag, socket, reinterpret_cast<char*>(header) + 1, 3, rest) == 3,
               incomplete);
  const uint32_t size = (uint32_t{header[0]} << 24) | (uint32_t{header[1]} << 16) |
                        (uint32_t{header[2]} << 8) | uint32_t{header[3]};
  TANDEM_CHECK(size <= kMaxFrameBytes, tag, " refused a message of ", size, " bytes (limit ",
               kMaxFrameBytes, "); is something other than Tandem talking?");
  constexpr size_t kChunk = 64 * 1024;  // memory follows the bytes received, not the size claimed
  std::string payload;
  while (payload.size() < size) {
    const size_t old_size = payload.size();
    const size_t chunk = std::min<size_t>(kChunk, size - old_size);
    payload.resize(old_size + chunk);
    TANDEM_CHECK(read_exactly(tag, socket, payload.data() + old_size, chunk, rest) == chunk,
                 incomplete);
  }
  return payload;
}

std::string format_duration(std::chrono::milliseconds duration) {
  const int64_t ms = duration.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(ms) / 1000.0);
  return text;
}

}  // namespace tandem::parallel::net
