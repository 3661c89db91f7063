#pragma once
/// The server behind TcpStore: holds the keys of one job in memory and answers clients over TCP.
/// Rank 0 hosts it, or the launcher does (tandem-run on node 0, so the store outlives workers).
///
/// Note [Store event loop]: one thread serves every connection from one epoll loop; a Get or Wait
/// of keys not set yet is parked in the loop with its deadline, not a blocked thread. A thread per
/// connection (what this server did first) let any client that can reach the port cost a thread
/// each: under a process limit the 62nd idle connection made std::thread throw and the store, and
/// the launcher's workers with it, died in std::terminate (review S2). epoll directly rather than
/// libuv (PyTorch's choice for the same reason): the loop is ~300 lines, a job's store sees at most
/// a few thousand connections and tens of requests per rank, and epoll adds no dependency to the
/// GPU nodes' offline kit. Deadlines are found by a scan of the connections on each turn of the
/// loop, which at the connection cap costs microseconds, far below a rendezvous' round trip.
/// A client that disconnects (or dies) loses nothing but its connection; its keys stay.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "parallel/comm/rendezvous/store_server_options.h"
#include "parallel/comm/rendezvous/store_table.h"

namespace tandem::parallel {

class StoreLoop;  // store_loop.h

class StoreServer {
 public:
  /// Listens before returning, so a busy port is an error here ("port P is already in use") and
  /// clients may connect as soon as the constructor returns. Raises this process's soft limit of
  /// open files to its hard limit (every connection is a descriptor).
  explicit StoreServer(StoreServerOptions options = {});
  /// Fails every parked request ("shutting down"), gives replies under way a moment to go out,
  /// closes every connection and joins the loop's thread. Never throws.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const { return port_; }

 private:
  int port_ = 0;
  std::unique_ptr<StoreLoop> loop_;
  std::thread thread_;
};

}  // namespace tandem::parallel
