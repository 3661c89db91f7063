#include "parallel/comm/rendezvous/store_loop.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/error.h"
#include "parallel/comm/rendezvous/store_auth.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;

void write_stderr(const std::string& line) {
  const std::string text = line + "\n";
  [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
}

}  // namespace

std::string peer_name(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  char host[NI_MAXHOST] = {}, port[NI_MAXSERV] = {};
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      ::getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host, sizeof(host), port,
                    sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "an unknown peer";
  }
  return address.ss_family == AF_INET6 ? std::string("[") + host + "]:" + port
                                       : std::string(host) + ":" + port;
}

void raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);  // may fail where the hard limit is infinite: no harm
}

// Note [Descriptors kept for the process]: the store lives inside rank 0 or the launcher, whose
// own work needs descriptors too (Gloo's pairs, data and checkpoint files, the workers' pipes;
// even the sanitizers open a pipe to check memory). Were a flood allowed to take them all, the
// store would survive (Note [Out of descriptors]) while its host failed. So connections are
// capped at three quarters of the open-file limit: past that a newcomer replaces the oldest
// connection that has not proved itself, and a quarter of the limit stays with the process.
size_t connection_cap(size_t configured) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
    return configured;
  }
  const size_t three_quarters = static_cast<size_t>(limit.rlim_cur) / 4 * 3;
  return std::min(configured, std::max<size_t>(three_quarters, 16));
}

RefusalLog::RefusalLog(std::function<void(const std::string&)> sink)
    : sink_(sink ? std::move(sink) : write_stderr) {}

void RefusalLog::refuse(const std::string& kind, const std::string& line) {
  Kind& k = kinds_[kind];
  const auto now = net::Clock::now();
  if (now < k.next) {
    ++k.untold;
    return;
  }
  sink_(k.untold == 0 ? line
                      : line + " (and " + std::to_string(k.untold) + " more like it before)");
  k.untold = 0;
  k.next = now + 10s;
}

StoreLoop::StoreLoop(StoreServerOptions options)
    : options_(std::move(options)), table_(options_.limits), log_(options_.log) {
  listener_ = net::listen_on("[store]", options_.host, options_.port);
  port_ = net::local_port(listener_);
  auth::check_token(options_.token);
  if (options_.token.empty() &&
      (options_.host.empty() || !net::resolves_to_loopback_only(options_.host))) {
    (options_.log ? options_.log : write_stderr)(
        "[store] listening on " +
        (options_.host.empty() ? std::string("every interface") : options_.host) + ", port " +
        std::to_string(port_) +
        ", with no job token: anyone who can reach this port can "
        "join the job; set " +
        auth::kTokenVariable +
        " (the same on every node, e.g. from "
        "`openssl rand -hex 32`) to refuse them");
  }
  ::fcntl(listener_.fd(), F_SETFL, ::fcntl(listener_.fd(), F_GETFL, 0) | O_NONBLOCK);
  epoll_ = net::Socket(::epoll_create1(EPOLL_CLOEXEC));
  wake_ = net::Socket(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  spare_ = net::Socket(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  connection_cap_ = connection_cap(options_.max_connections);
  TANDEM_CHECK(epoll_.valid() && wake_.valid(),
               "[store] cannot start the event loop: ", std::strerror(errno));
  for (net::Socket* s : {&listener_, &wake_}) {
    epoll_event event{.events = EPOLLIN, .data = {.ptr = s}};
    TANDEM_CHECK(::epoll_ctl(epoll_.fd(), EPOLL_CTL_ADD, s->fd(), &event) == 0,
                 "[store] epoll_ctl failed: ", std::strerror(errno));
  }
}

StoreLoop::~StoreLoop() = default;

void StoreLoop::stop() {
  stopping_ = true;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t ignored = ::write(wake_.fd(), &one, sizeof(one));
}

void StoreLoop::run() noexcept {
  try {
    while (!stopping_) turn();
    finish_replies();
  } catch (const std::exception& e) {
    // Only allocation can throw here; the store ends, and its clients are told by the closing.
    write_stderr(std::string("[store] the rendezvous store stopped: ") + e.what());
  }
  for (auto& c : connections_) close(*c);
}

void StoreLoop::turn() {
  epoll_event events[64];
  const int n = ::epoll_wait(epoll_.fd(), events, 64, wait_ms());
  for (int i = 0; i < n; ++i) {
    void* what = events[i].data.ptr;
    if (what == &listener_) {
      accept_all();
    } else if (what != &wake_) {
      on_event(*static_cast<Connection*>(what), events[i].events);
    }
  }
  wake_parked();
  expire(Clock::now());
  connections_.remove_if([](const std::unique_ptr<Connection>& c) { return c->closed; });
}

// Milliseconds until the nearest deadline of any connection, for epoll_wait.
int StoreLoop::wait_ms() const {
  Clock::time_point next = Clock::time_point::max();
  for (const auto& c : connections_) {
    if (c->closed) continue;
    if (!c->proved) next = std::min(next, c->prove_by);
    if (c->header_got > 0) next = std::min(next, c->frame_by);
    if (c->parked) next = std::min(next, c->wait_by);
    if (c->out) next = std::min(next, c->send_by);
  }
  if (next == Clock::time_point::max()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 3600 * 1000));
}

void StoreLoop::expire(Clock::time_point now) {
  const auto seconds = [](std::chrono::milliseconds d) { return net::format_duration(d); };
  for (auto& ptr : connections_) {
    Connection& c = *ptr;
    if (c.closed) continue;
    if (!c.proved && now >= c.prove_by) {
      refuse(c, "first",
             "closed a connection from " + c.peer + " that sent no request within " +
                 seconds(options_.first_frame_timeout) + " (first_frame_timeout)");
    } else if (c.header_got > 0 && now >= c.frame_by) {
      refuse(c, "frame",
             "closed a connection from " + c.peer + " that did not finish its message within " +
                 seconds(options_.frame_timeout) + " (frame_timeout)");
    } else if (c.parked && now >= c.wait_by) {
      StoreReply reply = table_.timed_out(*c.parked);
      c.parked.reset();
      answer(c, std::move(reply));
    } else if (c.out && now >= c.send_by) {
      const linger reset{.l_onoff = 1, .l_linger = 0};  // drop what the kernel still holds for it
      ::setsockopt(c.socket.fd(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
      refuse(c, "send",
             "closed a connection from " + c.peer + " that did not take its reply of " +
                 std::to_string(c.out->size()) + " bytes within " + seconds(options_.send_timeout) +
                 " (send_timeout)");
    }
  }
}

void StoreLoop::refuse(Connection& c, const std::string& kind, const std::string& why) {
  log_.refuse(kind, "[store] " + why);
  close(c);
}

void StoreLoop::close(Connection& c) {
  if (c.closed) return;
  ::epoll_ctl(epoll_.fd(), EPOLL_CTL_DEL, c.socket.fd(), nullptr);
  table_.release_frame(c.reserved);
  c.reserved = 0;
  c.parked.reset();
  c.out.reset();
  c.payload = std::string();
  c.socket.reset();
  c.closed = true;
  --open_;
}

void StoreLoop::watch(Connection& c, uint32_t events) {
  if (c.watching == events) return;
  epoll_event event{.events = events, .data = {.ptr = &c}};
  ::epoll_ctl(epoll_.fd(), EPOLL_CTL_MOD, c.socket.fd(), &event);
  c.watching = events;
}

// Note [Parked waits]: a parked Get or Wait is looked at again only when a key was created
// (overwrites cannot complete it), from where its last look stopped (keys are never removed), so
// a Wait of many keys costs each key one look over its life, not one per change.
void StoreLoop::wake_parked() {
  if (table_.generation() == seen_generation_) return;
  seen_generation_ = table_.generation();
  for (auto& ptr : connections_) {
    Connection& c = *ptr;
    if (c.closed || !c.parked || !table_.ready(*c.parked, c.cursor)) continue;
    std::optional<StoreReply> reply = table_.answer(*c.parked);
    c.parked.reset();
    if (reply) answer(c, std::move(*reply));
  }
}

void StoreLoop::finish_replies() {
  // The wake-up stays readable (never drained): out of the set, or every wait below returns at
  // once.
  ::epoll_ctl(epoll_.fd(), EPOLL_CTL_DEL, wake_.fd(), nullptr);
  ::epoll_ctl(epoll_.fd(), EPOLL_CTL_DEL, listener_.fd(), nullptr);
  listener_.reset();
  for (auto& ptr : connections_) {
    Connection& c = *ptr;
    if (c.closed) continue;
    c.close_after_reply = true;
    if (c.parked) {
      c.parked.reset();
      answer(c, StoreTable::shutting_down());
    } else if (!c.out) {
      close(c);
    }
  }
  // Replies under way (the set() that let rank 0 finish) get a moment to reach their clients.
  const auto deadline = Clock::now() + 2s;
  while (open_ > 0 && Clock::now() < deadline) {
    epoll_event events[64];
    const int n = ::epoll_wait(epoll_.fd(), events, 64, 50);
    for (int i = 0; i < n; ++i) {
      void* what = events[i].data.ptr;
      if (what != &wake_ && what != &listener_) {
        on_event(*static_cast<Connection*>(what), events[i].events);
      }
    }
    expire(Clock::now());
  }
}

}  // namespace tandem::parallel
