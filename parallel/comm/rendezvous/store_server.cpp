#include "parallel/comm/rendezvous/store_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/error.h"
#include "parallel/comm/rendezvous/store_protocol.h"

namespace tandem::parallel {
namespace {

using protocol::Command;
using protocol::Status;
using protocol::Writer;

std::string status_only(Status status) {
  return Writer().u8(static_cast<uint8_t>(status)).str();
}

std::string shutting_down() {
  return Writer()
      .u8(static_cast<uint8_t>(Status::Failed))
      .bytes("the rendezvous store is shutting down (did rank 0 or the launcher exit?)")
      .str();
}

// Client timeouts arrive as raw integers: keep them in a range that chrono arithmetic survives.
std::chrono::milliseconds clamp_timeout(int64_t ms) {
  constexpr int64_t kYear = int64_t{365} * 24 * 3600 * 1000;
  return std::chrono::milliseconds(std::clamp<int64_t>(ms, 0, kYear));
}

}  // namespace

StoreServer::StoreServer(StoreServerOptions options) : options_(std::move(options)) {
  listener_ = net::listen_on("[store]", options_.host, options_.port);
  port_ = net::local_port(listener_);
  int fds[2];
  TANDEM_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "[store] pipe failed: ", std::strerror(errno));
  wake_read_ = net::Socket(fds[0]);
  wake_write_ = net::Socket(fds[1]);
  acceptor_ = std::thread([this] { accept_loop(); });
}

StoreServer::~StoreServer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  const char byte = 1;
  [[maybe_unused]] const ssize_t ignored = ::write(wake_write_.fd(), &byte, 1);
  if (acceptor_.joinable()) acceptor_.join();
  // Only the reading side is shut, so a reply already being sent
  // (say, to the set() that let rank 0 finish) still reaches its client; blocked reads return
  // EOF, blocked get()/wait() see stopping_, and a send to a client that stopped reading gives
  // up after the send timeout. So every thread ends.
  for (auto& connection : connections_) connection->socket.shutdown_read();
  for (auto& connection : connections_) {
    if (connection->thread.joinable()) connection->thread.join();
  }
}

void StoreServer::accept_loop() {
  while (true) {
    pollfd entries[2] = {{listener_.fd(), POLLIN, 0}, {wake_read_.fd(), POLLIN, 0}};
    const int ready = ::poll(entries, 2, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || entries[1].revents != 0) return;
    if ((entries[0].revents & POLLIN) == 0) continue;
    net::Socket client(::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!client.valid()) continue;  // the client gave up between poll and accept
    const timeval send_timeout{.tv_sec = 10, .tv_usec = 0};
    setsockopt(client.fd(), SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
    reap_finished();
    if (connections_.size() >= options_.max_connections) continue;  // closed: a flood, not a job
    auto connection = std::make_unique<Connection>();
    connection->socket = std::move(client);
    Connection* raw = connection.get();
    connections_.push_back(std::move(connection));
    raw->thread = std::thread([this, raw] { serve(*raw); });
  }
}

void StoreServer::reap_finished() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if ((*it)->finished.load()) {
      (*it)->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void StoreServer::serve(Connection& connection) {
  // Any error (malformed request, vanished client) ends this connection only; the server and
  // the other ranks' connections carry on.
  try {
    while (auto request = net::receive_frame("[store]", connection.socket, std::nullopt,
                                             options_.frame_timeout)) {
      net::send_frame("[store]", connection.socket, handle(*request));
    }
  } catch (const std::exception&) {
  }
  // Tell the client at once (a stalled or malformed one included); the descriptor itself is
  // closed when the connection is reaped.
  ::shutdown(connection.socket.fd(), SHUT_RDWR);
  connection.finished.store(true);
}

std::string StoreServer::handle(const std::string& frame) {
  protocol::Request request = protocol::parse_request(frame);
  switch (request.command) {
    case Command::Set: {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        data_[std::move(request.keys[0])] = std::move(request.value);
      }
      changed_.notify_all();
      return status_only(Status::Ok);
    }
    case Command::Get: return handle_get(request.keys[0], clamp_timeout(request.timeout_ms));
    case Command::Add: return handle_add(request.keys[0], request.delta);
    case Command::Wait: return handle_wait(request.keys, clamp_timeout(request.timeout_ms));
    case Command::Check: {
      std::lock_guard<std::mutex> lock(mutex_);
      bool present = true;
      for (const auto& key : request.keys) present = present && data_.count(key) > 0;
      return Writer().u8(static_cast<uint8_t>(Status::Ok)).u8(present ? 1 : 0).str();
    }
  }
  TANDEM_FAIL("[store] unknown command ", static_cast<int>(request.command));
}

std::string StoreServer::handle_get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return stopping_ || data_.count(key) > 0; });
  // A key that arrived is an answer even while stopping: the client may be this job's last.
  const auto it = data_.find(key);
  if (it != data_.end())
    return Writer().u8(static_cast<uint8_t>(Status::Ok)).bytes(it->second).str();
  if (stopping_) return shutting_down();
  return status_only(Status::Timeout);
}

std::string StoreServer::handle_add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = data_.find(key);
    if (it != data_.end()) {
      const std::optional<int64_t> counter = protocol::parse_counter(it->second);
      if (!counter) {
        return Writer()
            .u8(static_cast<uint8_t>(Status::Failed))
            .bytes(protocol::kNotACounter)
            .str();
      }
      value = *counter;
    }
    value += delta;
    data_[key] = std::to_string(value);
  }
  changed_.notify_all();
  return Writer().u8(static_cast<uint8_t>(Status::Ok)).i64(value).str();
}

std::string StoreServer::handle_wait(const std::vector<std::string>& keys,
                                     std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto all_present = [&] {
    for (const auto& key : keys) {
      if (data_.count(key) == 0) return false;
    }
    return true;
  };
  changed_.wait_for(lock, timeout, [&] { return stopping_ || all_present(); });
  if (all_present()) return status_only(Status::Ok);
  if (stopping_) return shutting_down();
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    if (data_.count(key) == 0) missing.push_back(key);
  }
  return Writer().u8(static_cast<uint8_t>(Status::Timeout)).strings(missing).str();
}

}  // namespace tandem::parallel
