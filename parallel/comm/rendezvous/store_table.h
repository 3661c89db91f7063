#pragma once
/// The keys and values of a StoreServer and its answers to requests, apart from any socket: the
/// event loop (store_server.cpp) feeds it decoded requests, and the fuzz target feeds it
/// arbitrary ones (tests/fuzz/targets.cpp).
///
/// Note [Store budget]: everything a client can make the server hold is counted against one
/// budget of bytes: the keys and values in the table, and every request frame as its bytes arrive
/// until it is answered (a parked Wait keeps its keys so long). A frame whose announced size does
/// not fit is refused from its header, one that outgrows what is left as it arrives is refused
/// then, a Set that would not fit is answered with a refusal: the store's memory stays near
/// `max_bytes` whatever clients send, and a stalled frame holds only what it sent. What the
/// budget does not count is bounded otherwise: a reply shares its value with the table (no copy),
/// and an overwritten value that a slow reader still holds lives only until the reply's send
/// deadline.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parallel/comm/rendezvous/store_protocol.h"

namespace tandem::parallel {

struct StoreLimits {
  /// Keys + values held, plus frames being received or waiting for an answer. A job holds tens
  /// of bytes per rank, so this is far above any real job.
  size_t max_bytes = size_t{64} << 20;
  /// Keys in one Wait or Check (PyTorch's TCPStore: 128 Ki). A job waits for one key per rank.
  size_t max_keys_per_request = size_t{64} << 10;
};

/// A reply frame, ready to send without copying the value: `head` is the frame's length prefix,
/// the status and the value's length prefix; `value` (may be null) is shared with the table.
struct StoreReply {
  std::string head;
  std::shared_ptr<const std::string> value;
  /// The one-line reason when a bound refused the request (the server logs it), else "".
  std::string refused;
  size_t size() const { return head.size() + (value ? value->size() : 0); }
};

class StoreTable {
 public:
  explicit StoreTable(StoreLimits limits = {});

  /// Reserves budget for a frame of `size` bytes about to be received; false (nothing reserved)
  /// when it does not fit. Each reservation is released by release_frame once answered.
  bool reserve_frame(size_t size);
  void release_frame(size_t size);

  /// A refusal for a frame that announces more keys than a request may hold, before it is
  /// decoded (protocol::announced_keys); nothing for any other frame.
  std::optional<StoreReply> refuse_early(std::string_view frame) const;

  /// The answer to `request` now, or nothing when it must wait for keys (a Get or Wait of keys
  /// not set yet): the caller parks it and asks again with ready() after each change. A Set's
  /// value is moved into the table, not copied.
  std::optional<StoreReply> answer(protocol::Request& request);
  /// Whether a parked request can be answered now. `cursor` is the request's own: keys are never
  /// removed, so keys already seen need no second look (Note [Parked waits] in store_server.cpp).
  bool ready(const protocol::Request& request, size_t& cursor) const;
  /// The answer to a parked request whose time ran out, or that the server gives up on.
  StoreReply timed_out(const protocol::Request& request) const;
  static StoreReply shutting_down();

  /// How many keys were created so far: a parked request needs a second look only when it grew.
  uint64_t generation() const { return generation_; }
  size_t bytes_held() const { return held_; }
  const StoreLimits& limits() const { return limits_; }

 private:
  StoreReply set(std::string key, std::string value);
  StoreReply add(const std::string& key, int64_t delta);
  bool has(const std::string& key) const { return data_.count(key) > 0; }

  StoreLimits limits_;
  std::map<std::string, std::shared_ptr<const std::string>> data_;
  size_t held_ = 0;  // Note [Store budget]
  uint64_t generation_ = 0;
};

/// A Failed reply that a bound gave (`refused` set, so the server logs it).
StoreReply refusal(std::string why);

/// A reply frame of `status` and the fields `fields` already written.
StoreReply make_reply(protocol::Status status, const std::string& fields = {},
                      std::shared_ptr<const std::string> value = nullptr);

}  // namespace tandem::parallel
