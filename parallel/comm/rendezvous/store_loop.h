#pragma once
/// The event loop behind StoreServer (Note [Store event loop] in store_server.h): the listening
/// socket, every connection's state, the parked requests and the deadlines. Internal to the
/// server; StoreServer runs it on its one thread.

#include <atomic>
#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "parallel/comm/rendezvous/store_protocol.h"
#include "parallel/comm/rendezvous/store_server_options.h"
#include "parallel/comm/rendezvous/store_table.h"
#include "parallel/comm/socket.h"

namespace tandem::parallel {

/// Raises the soft RLIMIT_NOFILE to the hard limit: the common soft limit of 1,024 is what a
/// flood of idle connections exhausts first (review S2). Nothing in Tandem uses select().
void raise_open_file_limit();

/// How many connections the store may hold: `configured`, or fewer where the open-file limit
/// would not leave the rest of the process enough (Note [Descriptors kept for the process]).
size_t connection_cap(size_t configured);

/// "10.0.0.2:40112" ("[::1]:40112"): a connected socket's peer, as refusals name it.
std::string peer_name(int fd);

/// One line per kind of refusal at most every 10 s, with how many were not told.
class RefusalLog {
 public:
  explicit RefusalLog(std::function<void(const std::string&)> sink);
  void refuse(const std::string& kind, const std::string& line);

 private:
  struct Kind {
    net::Clock::time_point next{};
    size_t untold = 0;
  };
  std::function<void(const std::string&)> sink_;
  std::map<std::string, Kind> kinds_;
};

class StoreLoop {
 public:
  /// Listens (errors as net::listen_on's), but serves nothing until run().
  explicit StoreLoop(StoreServerOptions options);
  ~StoreLoop();
  StoreLoop(const StoreLoop&) = delete;
  StoreLoop& operator=(const StoreLoop&) = delete;

  int port() const { return port_; }
  /// Serves until stop(); never throws.
  void run() noexcept;
  /// Asks run() to end (from any thread).
  void stop();

 private:
  using Clock = net::Clock;

  struct Connection {
    net::Socket socket;
    std::string peer;              // "10.0.0.2:40112", for refusals
    bool proved = false;           // sent one whole, well-formed first message
    bool closed = false;           // erased at the end of the loop's turn
    Clock::time_point prove_by{};  // first_frame_timeout after arrival
    uint32_t watching = 0;         // the epoll events asked for
    // The frame being received (Note [Frames] in socket.h).
    unsigned char header[4] = {};
    size_t header_got = 0;
    size_t size = 0;      // the payload's announced size, once the header is whole
    size_t reserved = 0;  // bytes taken from the budget as they arrived (Note [Store budget])
    std::string payload;
    std::string skip;    // why the frame is being read past (not kept), to answer after it
    size_t skipped = 0;  // bytes of it read past
    Clock::time_point frame_by = Clock::time_point::max();
    // A Get or Wait for keys not set yet, and when it times out.
    std::optional<protocol::Request> parked;
    size_t cursor = 0;
    Clock::time_point wait_by{};
    // The reply being sent, and when it must be taken.
    std::optional<StoreReply> out;
    size_t sent = 0;
    Clock::time_point send_by{};
    bool close_after_reply = false;
    // The handshake (Note [Store handshake]): this server's nonce once the hello came, and the
    // client's.
    std::string nonce, client_nonce;
  };

  void turn();
  void accept_all();
  bool accept_one();
  void on_event(Connection& c, uint32_t events);
  void read_some(Connection& c);
  bool read_header(Connection& c);
  void skip_frame(Connection& c, std::string why);
  void read_past(Connection& c);
  std::string budget_refusal(size_t size) const;
  void on_frame(Connection& c);
  void on_handshake(Connection& c);
  void deny(Connection& c, const std::string& why);
  void answer(Connection& c, StoreReply reply);
  void write_some(Connection& c);
  void wake_parked();
  void expire(Clock::time_point now);
  int wait_ms() const;
  void refuse(Connection& c, const std::string& kind, const std::string& why);
  void close(Connection& c);
  bool evict_unproved();
  void watch(Connection& c, uint32_t events);
  void finish_replies();

  StoreServerOptions options_;
  StoreTable table_;
  RefusalLog log_;
  net::Socket listener_, epoll_, wake_;
  net::Socket spare_;  // a reserved descriptor, given up to accept-and-close when none is left
  int port_ = 0;
  std::list<std::unique_ptr<Connection>> connections_;  // in order of arrival
  size_t open_ = 0;                                     // connections not closed
  size_t connection_cap_ = 0;                           // connection_cap(max_connections)
  uint64_t seen_generation_ = 0;
  std::atomic<bool> stopping_{false};
};

}  // namespace tandem::parallel
