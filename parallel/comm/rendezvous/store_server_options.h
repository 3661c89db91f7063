#pragma once
/// What a StoreServer is told: where it listens and every bound it keeps (Note [Store budget] in
/// store_table.h). Apart from store_server.h so that the loop (store_loop.h) and the server that
/// runs it each include it, not each other.

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

#include "parallel/comm/rendezvous/store_table.h"

namespace tandem::parallel {

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
  /// new connection takes the place of the oldest that has not proved itself, or is closed. The
  /// server lowers it to three quarters of the open-file limit (Note [Descriptors kept for the
  /// process] in store_loop.cpp).
  size_t max_connections = 8192;
  /// Bytes held and keys per request (Note [Store budget]).
  StoreLimits limits{};
  /// The job's secret (Note [Store handshake] in store_auth.h); empty: any client that says
  /// hello may join, and a store that listens beyond loopback says so once.
  std::string token{};
  /// Where refusals are reported, one line each, at most one per kind per 10 s; empty: stderr.
  std::function<void(const std::string& line)> log{};
};

}  // namespace tandem::parallel
