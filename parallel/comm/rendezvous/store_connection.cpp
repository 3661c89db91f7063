// StoreLoop's side of one connection: accepting it, reading its frames, answering, sending the
// reply (store_loop.cpp has the loop itself, deadlines and shutdown).
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/error.h"
#include "parallel/comm/rendezvous/store_auth.h"
#include "parallel/comm/rendezvous/store_loop.h"

namespace tandem::parallel {
namespace {

constexpr size_t kChunk = 64 * 1024;  // memory follows the bytes received, not the size claimed
constexpr size_t kFirstFrameBytes = 4096;  // before a client has spoken, it may not send more

// Client timeouts arrive as raw integers: keep them in a range that chrono arithmetic survives.
std::chrono::milliseconds clamp_timeout(int64_t ms) {
  constexpr int64_t kYear = int64_t{365} * 24 * 3600 * 1000;
  return std::chrono::milliseconds(std::clamp<int64_t>(ms, 0, kYear));
}

}  // namespace

void StoreLoop::accept_all() {
  // A bounded batch per turn, so a flood of arrivals cannot starve the connections being served.
  for (int i = 0; i < 64 && accept_one(); ++i) {
  }
}

// Note [Out of descriptors]: when accept() fails with EMFILE or ENFILE the connection stays in the
// listen queue and epoll reports it again at once: the loop would spin a core while ranks wait
// (review S2). So the oldest connection that has not proved itself makes room; with none, the
// spare descriptor is given up to accept the newcomer and close it at once (libuv's "emfile
// trick"), and taken back.
bool StoreLoop::accept_one() {
  net::Socket client(::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
  if (!client.valid()) {
    if (errno == EINTR || errno == ECONNABORTED) return true;
    if (errno != EMFILE && errno != ENFILE) return false;  // EAGAIN: none left
    if (evict_unproved()) return true;
    spare_.reset();
    net::Socket victim(::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    victim.reset();
    spare_ = net::Socket(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    log_.refuse("descriptors",
                "[store] out of file descriptors: closed a new connection at once (raise "
                "`ulimit -n`, or find who opens so many connections)");
    return spare_.valid();
  }
  if (open_ >= connection_cap_ && !evict_unproved()) {
    log_.refuse("connections", "[store] closed a new connection: " + std::to_string(open_) +
                                   " are open, the limit (max_connections, at most three "
                                   "quarters of `ulimit -n`)");
    return true;
  }
  const int one = 1;
  ::setsockopt(client.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  auto c = std::make_unique<Connection>();
  c->peer = peer_name(client.fd());
  c->socket = std::move(client);
  c->prove_by = net::deadline_after(options_.first_frame_timeout);
  c->watching = EPOLLIN | EPOLLRDHUP;
  epoll_event event{.events = c->watching, .data = {.ptr = c.get()}};
  if (::epoll_ctl(epoll_.fd(), EPOLL_CTL_ADD, c->socket.fd(), &event) != 0) return true;
  connections_.push_back(std::move(c));
  ++open_;
  return true;
}

bool StoreLoop::evict_unproved() {
  for (auto& c : connections_) {
    if (!c->closed && !c->proved) {
      refuse(*c, "evicted",
             "closed a connection from " + c->peer +
                 " that had not sent a request yet, to make room for a new one");
      return true;
    }
  }
  return false;
}

void StoreLoop::on_event(Connection& c, uint32_t events) {
  if (c.closed) return;
  if ((events & EPOLLERR) != 0) return close(c);
  if (c.out) {
    if ((events & (EPOLLOUT | EPOLLHUP)) != 0) write_some(c);
    return;
  }
  if (c.parked) {  // only a hang-up is watched while parked
    if ((events & (EPOLLRDHUP | EPOLLHUP)) != 0) close(c);
    return;
  }
  read_some(c);
}

// Reads what has arrived of the current frame; one frame per turn, so that one busy client
// cannot keep the loop from the others.
void StoreLoop::read_some(Connection& c) {
  while (!c.closed) {
    if (c.header_got < 4) {
      if (!read_header(c)) return;
      continue;
    }
    if (!c.skip.empty()) {
      read_past(c);
      return;
    }
    if (c.payload.size() < c.size) {
      const size_t old = c.payload.size();
      const size_t chunk = std::min(kChunk, c.size - old);
      if (!table_.reserve_frame(chunk)) return skip_frame(c, budget_refusal(c.size));
      c.reserved += chunk;
      c.payload.resize(old + chunk);
      const ssize_t got = ::recv(c.socket.fd(), c.payload.data() + old, chunk, 0);
      c.payload.resize(old + static_cast<size_t>(std::max<ssize_t>(got, 0)));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (got <= 0) return close(c);  // gone in the middle of a message
    }
    if (c.payload.size() == c.size) return on_frame(c);
  }
}

// Reads header bytes; false when the loop must wait (or the connection ended).
bool StoreLoop::read_header(Connection& c) {
  const ssize_t got = ::recv(c.socket.fd(), c.header + c.header_got, 4 - c.header_got, 0);
  if (got < 0 && errno == EINTR) return true;
  if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  if (got <= 0) {
    close(c);  // gone (between messages, the normal way to leave)
    return false;
  }
  if (c.header_got == 0) c.frame_by = net::deadline_after(options_.frame_timeout);
  c.header_got += static_cast<size_t>(got);
  if (c.header_got < 4) return true;
  const size_t size = (size_t{c.header[0]} << 24) | (size_t{c.header[1]} << 16) |
                      (size_t{c.header[2]} << 8) | size_t{c.header[3]};
  if (size > net::kMaxFrameBytes) {
    refuse(c, "frame",
           "refused a message of " + std::to_string(size) + " bytes from " + c.peer + " (limit " +
               std::to_string(net::kMaxFrameBytes) + "); is something other than Tandem talking?");
    return false;
  }
  if (!c.proved && size > kFirstFrameBytes) {
    refuse(c, "first",
           "refused a first message of " + std::to_string(size) + " bytes from " + c.peer +
               " (a client's first message is a short hello)");
    return false;
  }
  c.size = size;
  if (size > table_.limits().max_bytes - table_.bytes_held()) {
    skip_frame(c, budget_refusal(size));
    return !c.closed;
  }
  return true;
}

std::string StoreLoop::budget_refusal(size_t size) const {
  return "a message of " + std::to_string(size) + " bytes does not fit: the store holds " +
         std::to_string(table_.bytes_held()) + " bytes of its budget of " +
         std::to_string(table_.limits().max_bytes) + " (max_bytes)";
}

// A frame that does not fit the budget is read past into a fixed scratch buffer, not kept, and
// answered with the refusal: the client learns why in one line, and the store holds nothing.
void StoreLoop::skip_frame(Connection& c, std::string why) {
  table_.release_frame(c.reserved);
  c.reserved = 0;
  c.skipped = c.payload.size();
  c.payload = std::string();
  c.skip = std::move(why);
  read_past(c);
}

void StoreLoop::read_past(Connection& c) {
  static thread_local char scratch[kChunk];
  while (c.skipped < c.size) {
    const ssize_t got = ::recv(c.socket.fd(), scratch, std::min(kChunk, c.size - c.skipped), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got <= 0) return close(c);
    c.skipped += static_cast<size_t>(got);
  }
  c.header_got = 0;
  c.frame_by = Clock::time_point::max();
  const std::string why = std::move(c.skip);
  c.skip = std::string();
  c.skipped = 0;
  answer(c, refusal(why));
}

void StoreLoop::on_frame(Connection& c) {
  if (!c.proved) return on_handshake(c);
  if (std::optional<StoreReply> refused = table_.refuse_early(c.payload)) {
    c.payload = std::string();
    c.header_got = 0;
    c.frame_by = Clock::time_point::max();
    return answer(c, std::move(*refused));
  }
  protocol::Request request;
  try {
    request = protocol::parse_request(c.payload);
  } catch (const Error& e) {
    std::string what = e.message();
    if (what.rfind("[store] ", 0) == 0) what.erase(0, 8);
    return refuse(c, "malformed", what + " from " + c.peer + "; closed its connection");
  }
  // The frame's bytes become the table's (a Set) or are dropped: given back before answering, and
  // taken again by a request that parks, so a Set of half the budget fits.
  const size_t held = c.reserved;
  table_.release_frame(held);
  c.reserved = 0;
  c.payload = std::string();
  c.header_got = 0;
  c.frame_by = Clock::time_point::max();
  std::optional<StoreReply> reply = table_.answer(request);
  if (reply) return answer(c, std::move(*reply));
  c.wait_by = net::deadline_after(clamp_timeout(request.timeout_ms));
  c.cursor = 0;
  c.reserved = table_.reserve_frame(held) ? held : 0;  // fits: just given back
  c.parked = std::move(request);
  watch(c, EPOLLRDHUP);
}

void StoreLoop::answer(Connection& c, StoreReply reply) {
  table_.release_frame(c.reserved);
  c.reserved = 0;
  if (!reply.refused.empty())
    log_.refuse("request", "[store] refused a request from " + c.peer + ": " + reply.refused);
  c.out = std::move(reply);
  c.sent = 0;
  c.send_by = net::deadline_after(options_.send_timeout);
  write_some(c);
}

// Sends the reply's head and its value (shared with the table) in one sendmsg: no copy.
void StoreLoop::write_some(Connection& c) {
  const std::string& head = c.out->head;
  const std::string* value = c.out->value.get();
  const size_t total = c.out->size();
  while (c.sent < total) {
    iovec parts[2];
    size_t n = 0;
    if (c.sent < head.size())
      parts[n++] = {const_cast<char*>(head.data()) + c.sent, head.size() - c.sent};
    const size_t offset = c.sent > head.size() ? c.sent - head.size() : 0;
    if (value != nullptr && offset < value->size()) {
      parts[n++] = {const_cast<char*>(value->data()) + offset, value->size() - offset};
    }
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = n;
    const ssize_t sent = ::sendmsg(c.socket.fd(), &message, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return watch(c, EPOLLOUT);
    if (sent <= 0) return close(c);
    c.sent += static_cast<size_t>(sent);
  }
  c.out.reset();
  if (c.close_after_reply) return close(c);
  watch(c, EPOLLIN | EPOLLRDHUP);
}

// The first messages of a connection (Note [Store handshake] in store_auth.h): nothing else is
// read or answered before they succeed.
void StoreLoop::on_handshake(Connection& c) {
  const std::string frame = std::move(c.payload);
  c.payload = std::string();
  c.header_got = 0;
  c.frame_by = Clock::time_point::max();
  const std::string& secret = options_.token;
  std::string client_nonce, client_proof;
  bool client_has_secret = false;
  uint8_t command = 0;
  try {
    protocol::Reader in(frame);
    command = in.u8();
    if (command == auth::kHello && c.nonce.empty()) {
      client_nonce = in.bytes();
      client_has_secret = in.u8() != 0;
    } else if (command == auth::kProve && !c.nonce.empty()) {
      client_proof = in.bytes();
    }
    TANDEM_CHECK(in.at_end() && (command == auth::kHello || command == auth::kProve), "");
    TANDEM_CHECK(command != auth::kHello || client_nonce.size() == auth::kNonceBytes, "");
  } catch (const Error&) {
    return refuse(
        c, "handshake",
        "closed a connection from " + c.peer + " that did not begin with a Tandem store handshake");
  }
  if (command == auth::kProve) {
    if (!auth::same_proof(client_proof, auth::proof(secret, "client", c.nonce, c.client_nonce))) {
      return deny(c, "a client at " + c.peer + " did not prove it knows the job's token (" +
                         auth::kTokenVariable + " differs, or it is not of this job)");
    }
    c.proved = true;
    return answer(c, make_reply(protocol::Status::Ok));
  }
  if (!secret.empty() && !client_has_secret) {
    return deny(c, "a client at " + c.peer + " has no job token, and this store needs one (set " +
                       auth::kTokenVariable + " to the job's token)");
  }
  const std::string nonce = auth::random_bytes(auth::kNonceBytes);
  const std::string server_proof =
      secret.empty() ? std::string() : auth::proof(secret, "server", client_nonce, nonce);
  c.proved = secret.empty();
  c.nonce = nonce;
  c.client_nonce = client_nonce;
  answer(c,
         make_reply(
             protocol::Status::Ok,
             protocol::Writer().bytes(nonce).u8(secret.empty() ? 0 : 1).bytes(server_proof).str()));
}

// Tells the client why in one line, logs it, and closes once the reply is out.
void StoreLoop::deny(Connection& c, const std::string& why) {
  log_.refuse("token", "[store] refused: " + why);
  c.close_after_reply = true;
  answer(c,
         make_reply(protocol::Status::Failed, protocol::Writer().bytes("refused: " + why).str()));
}

}  // namespace tandem::parallel
