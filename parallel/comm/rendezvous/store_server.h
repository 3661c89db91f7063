#pragma once
/// The server behind TcpStore: holds the keys of one job in memory and answers clients over TCP.
/// Rank 0 hosts it, or the launcher does (tandem-run on node 0, so the store outlives workers).
///
/// Note [Store threads]: one thread accepts connections and one thread serves each connection.
/// A job has one connection per rank, so a few hundred threads at most, and blocking get()/wait()
/// become a plain condition-variable wait on the server instead of a hand-written event loop.
/// A client that disconnects (or dies) ends its thread; its keys stay.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parallel/comm/socket.h"

namespace tandem::parallel {

struct StoreServerOptions {
  /// Address to listen on; empty: every interface (what a multi-node job needs).
  std::string host{};
  /// 0 picks a free port; port() then says which.
  int port = 0;
  /// A client that has begun a message must finish it within this, or it is disconnected
  /// (between messages it may stay silent as long as it likes: ranks do).
  std::chrono::milliseconds frame_timeout{30000};
  /// Connections served at once; more are closed on arrival. A job needs one per rank (plus
  /// the launcher's), so this only stops a flood from taking a thread each.
  size_t max_connections = 8192;
};

class StoreServer {
 public:
  /// Listens before returning, so a busy port is an error here ("port P is already in use") and
  /// clients may connect as soon as the constructor returns.
  explicit StoreServer(StoreServerOptions options = {});
  /// Disconnects every client (their pending calls fail) and joins all threads. Never throws.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const { return port_; }

 private:
  struct Connection {
    net::Socket socket;
    std::thread thread;
    std::atomic<bool> finished{false};
  };

  void accept_loop();
  void serve(Connection& connection);
  /// Handles one request and returns the reply.
  std::string handle(const std::string& request);
  std::string handle_get(const std::string& key, std::chrono::milliseconds timeout);
  std::string handle_add(const std::string& key, int64_t delta);
  std::string handle_wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  /// Joins connections whose client has gone.
  void reap_finished();

  StoreServerOptions options_;
  net::Socket listener_;
  net::Socket wake_read_, wake_write_;  // a pipe that interrupts the accept loop's poll()
  int port_ = 0;

  std::mutex mutex_;  // guards data_ and stopping_
  std::condition_variable changed_;
  std::map<std::string, std::string> data_;
  bool stopping_ = false;

  std::list<std::unique_ptr<Connection>> connections_;  // only the accept thread touches it
  std::thread acceptor_;
};

}  // namespace tandem::parallel
