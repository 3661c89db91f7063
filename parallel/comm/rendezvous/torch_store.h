#pragma once
/// A client of PyTorch's TCPStore, for ranks started by torchrun: its agent hosts the rendezvous
/// store and tells the workers so (TORCHELASTIC_USE_AGENT_STORE=True, MASTER_PORT = the agent's
/// store), so a Tandem rank must speak PyTorch's protocol instead of hosting its own store.
///
/// Note [TCPStore protocol]: each request is a one-byte query type followed by its arguments;
/// strings and byte vectors are a little-endian uint64 length and the bytes, integers are
/// little-endian int64; PyTorch's client writes every key with a "/" before it, and so does this
/// one. Only the queries Tandem's Store needs are used:
///   SET key value            → (no reply)
///   GET key                  → value          (sent after WAIT, as PyTorch's client does)
///   ADD key delta            → int64 new value (kept as decimal text, as Tandem's store does)
///   CHECK n key…             → uint8 0 = all present, 1 = not
///   WAIT n key…              → uint8 0 once all are present
///   GETNUMKEYS               → int64 (used only to tell the two versions apart)
/// Two versions exist. PyTorch before pytorch/pytorch#107607 (2023; the 1.13 in Debian 12 is one)
/// numbers SET = 0 … GETNUMKEYS = 6. Later versions insert VALIDATE = 0 (every client must open
/// with VALIDATE and the magic number 0x3C85F7CE or the server drops it) and shift the rest by
/// one. The constructor tells them apart by sending the legacy GETNUMKEYS first: a legacy server
/// answers it; a later one drops the connection, and only then is the validated GETNUMKEYS sent,
/// on a new connection (never both at once: see detect_protocol, review S6). The legacy version is
/// tested against Debian's PyTorch 1.13 (and its torchrun); the validated one is written from
/// PyTorch's source and has not met a real server here.

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "parallel/comm/rendezvous/store.h"
#include "parallel/comm/socket.h"

namespace tandem::parallel {

enum class TorchStoreProtocol {
  Legacy,     ///< no handshake; SET = 0
  Validated,  ///< VALIDATE handshake first; SET = 1
};

/// Thread-safe: calls are serialised over one connection. A failed or timed-out request poisons
/// the connection (a late reply would be read as the answer to the next request): later calls
/// fail fast with the reason.
class TorchStore final : public Store {
 public:
  /// Connects and detects the protocol; the error names the address and what went wrong. The
  /// timeout bounds connecting and telling the protocol apart too. A client only: `is_server`
  /// must be false (PyTorch's own TCPStore, or torchrun's agent, hosts the server).
  explicit TorchStore(TcpStoreOptions options);

  using Store::get;
  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  std::chrono::milliseconds timeout() const override { return options_.timeout; }
  std::string local_address() const override;

  TorchStoreProtocol protocol() const { return protocol_; }
  /// "HOST:PORT", as error messages name the store.
  std::string address() const;

 private:
  enum class Query : uint8_t;
  /// The byte of `query` in this server's dialect.
  char code(Query query) const;
  /// Under the lock: sends `request`, then lets `read_reply` read the reply from the socket by
  /// `deadline`. Any failure poisons the connection and is reported as "<what> failed: …".
  std::string transact(
      const std::string& what, const std::string& request, std::chrono::milliseconds timeout,
      const std::function<std::string(net::Clock::time_point deadline)>& read_reply);

  TcpStoreOptions options_;
  TorchStoreProtocol protocol_ = TorchStoreProtocol::Legacy;
  mutable std::mutex mutex_;  // one request in flight at a time; guards socket_
  net::Socket socket_;
};

}  // namespace tandem::parallel
