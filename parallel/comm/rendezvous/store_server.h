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

#include "parallel/comm/rendezvous/store_table.h"

namespace tandem::parallel {

class StoreLoop;  // store_loop.h

struct StoreServerOptions {
  /// Address to listen on: loopback unless told otherwise (net::listen_host_for picks it for a
  /// job's address); empty: every interface.
  std::string host = "127.0.0.1";
  /// 0 picks a free port; port() then says which.
  int port = 0;
  /// A client that has begun a message must finish it within this, or it is disconnected
  /// (between messages a client that proved itself may stay silent as long as it likes: ranks do).
  std::chrono::milliseconds frame_timeout{30000};
  /// A new connection must send its first whole message within this, or it is closed: port
  /// scanners, health checks and idle floods hold a descriptor for this long at most.
  std::chrono::milliseconds first_frame_timeout{5000};
  /// A reply must be taken by its client within this (the whole reply, not each send()), or the
  /// connection is closed: a client that asks for a large value and never reads costs no more.
  std::chrono::milliseconds send_timeout{30000};
  /// Connections served at once. A job needs one per rank (plus its launchers'); past the cap a
  /// new connection takes the place of the oldest that has not proved itself, or is closed.
  size_t max_connections = 8192;
  /// Bytes held and keys per request (Note [Store budget]).
  StoreLimits limits{};
  /// The job's secret (Note [Store handshake] in store_auth.h); empty: any client that says
  /// hello may join, and a store that listens beyond loopback says so once.
  std::string token{};
  /// Where refusals are reported, one line each, at most one per kind per 10 s; empty: stderr.
  std::function<void(const std::string& line)> log{};
};

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
