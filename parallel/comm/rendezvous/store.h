#pragma once
/// Rendezvous key-value store: how the ranks of a job find each other before any collective can
/// run (Gloo swaps its TCP addresses through it, NCCL its unique id).
///
/// `Store` is the interface; `TcpStore` talks to a `StoreServer` (store_server.h) at
/// MASTER_ADDR:MASTER_PORT, as PyTorch's TCPStore does; `PrefixStore` scopes keys so several
/// process groups can share one server.
///
///   StoreServer server({.port = 0});                       // rank 0 or the launcher
///   auto store = std::make_shared<TcpStore>(TcpStoreOptions{.port = server.port()});
///   store->set("rank0/address", to_bytes("10.0.0.1:4242"));
///   Bytes value = store->get("rank1/address");             // blocks until rank 1 sets it
///
/// Values are opaque bytes. Counters made by add() are stored as decimal text ("3"), so get()
/// on a counter returns readable bytes.

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "parallel/comm/rendezvous/store_auth.h"
#include "parallel/comm/rendezvous/store_server.h"
#include "parallel/comm/socket.h"

namespace tandem::parallel {

using Bytes = std::vector<uint8_t>;

inline Bytes to_bytes(std::string_view text) {
  return Bytes(text.begin(), text.end());
}
inline std::string to_string(const Bytes& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

/// "'a', 'b'": keys as the stores' timeout errors list them.
std::string quoted_keys(const std::vector<std::string>& keys);

class Store {
 public:
  virtual ~Store();

  /// Sets (or overwrites) key.
  virtual void set(const std::string& key, const Bytes& value) = 0;
  /// The value of key, waiting until some rank sets it; throws a tandem::Error naming the key
  /// and the timeout when `timeout` passes first.
  virtual Bytes get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  Bytes get(const std::string& key) { return get(key, timeout()); }
  /// Adds delta to the integer counter at key (a missing key counts as 0); returns the new value.
  /// Atomic across all clients, so it can hand out unique numbers or count arrivals.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  /// Waits until every key exists; the timeout error lists the keys still missing.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout()); }
  /// Whether every key exists, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  /// The timeout of get(key) and wait(keys).
  virtual std::chrono::milliseconds timeout() const = 0;
  /// The IP address of this end of the connection to the store ("" where there is none): it is
  /// on an interface that reaches MASTER_ADDR, so other machines can reach this one there too
  /// (Note [Gloo address] in init_process_group.cpp).
  virtual std::string local_address() const { return ""; }
};

/// Where a store client connects and how long it waits: TcpStore's, and TorchStore's (a client of
/// PyTorch's TCPStore, torch_store.h), which hosts no server.
struct TcpStoreOptions {
  std::string host = "127.0.0.1";
  int port = 29500;
  /// Also host the StoreServer in this process (rank 0, as PyTorch's TCPStore(is_master=True)),
  /// listening on `port` at net::listen_host_for(host) (loopback for a loopback host, Note [Store
  /// address] in socket.h); port 0 then picks a free one (see port()).
  bool is_server = false;
  /// The job's secret, proved in the handshake (Note [Store handshake] in store_auth.h); the
  /// server's too when is_server. TANDEM_JOB_TOKEN unless told otherwise; empty: none.
  std::string token = auth::token_from_environment();
  /// Bounds connecting (the server may start later than this client) and get()/wait() calls
  /// that take no timeout of their own.
  std::chrono::milliseconds timeout{300000};
  /// Where host and port came from, for the error when nobody answers there: "MASTER_ADDR:
  /// MASTER_PORT" (env://) or the URL ("tcp://node0:29500").
  std::string named_by = "MASTER_ADDR:MASTER_PORT";
};

/// A client of a StoreServer. Thread-safe: calls from several threads are serialised over one
/// connection.
class TcpStore final : public Store {
 public:
  /// Connects, retrying until options.timeout passes; the error then says "could not reach the
  /// rendezvous store at HOST:PORT after N s".
  explicit TcpStore(TcpStoreOptions options);
  ~TcpStore() override;
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  using Store::get;
  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  std::chrono::milliseconds timeout() const override { return options_.timeout; }
  std::string local_address() const override;

  /// "HOST:PORT", as error messages name the store.
  std::string address() const;
  /// The server's port (the one picked, when is_server asked for port 0).
  int port() const { return options_.port; }

 private:
  /// Sends one request and returns the reply; `server_wait` is how long the server may block
  /// before replying. A lost connection (or no reply) poisons the client: later calls fail fast.
  std::string round_trip(const std::string& request, std::chrono::milliseconds server_wait);
  /// The handshake; "" when it succeeded, else why this store and this client do not belong
  /// together. A lost connection throws.
  std::string introduce();

  TcpStoreOptions options_;
  std::unique_ptr<StoreServer> server_;  // when is_server; declared before socket_, outlives it
  mutable std::mutex mutex_;             // one request in flight at a time; guards socket_
  net::Socket socket_;
};

/// Prepends `prefix` to every key, so that independent users of one store cannot collide.
class PrefixStore final : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  using Store::get;
  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  std::chrono::milliseconds timeout() const override { return store_->timeout(); }
  std::string local_address() const override { return store_->local_address(); }

  const std::shared_ptr<Store>& underlying() const { return store_; }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> store_;
};

}  // namespace tandem::parallel
