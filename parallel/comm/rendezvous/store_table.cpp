#include "parallel/comm/rendezvous/store_table.h"

namespace tandem::parallel {
namespace {

using protocol::Command;
using protocol::Request;
using protocol::Status;
using protocol::Writer;

std::string big_endian32(size_t n) {
  return {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
          static_cast<char>(n)};
}

std::string too_many_keys(int64_t count, size_t limit) {
  return "a request of " + std::to_string(count) + " keys is over the store's limit of " +
         std::to_string(limit) + " keys per wait or check (max_keys_per_request)";
}

}  // namespace

StoreReply make_reply(Status status, const std::string& fields,
                      std::shared_ptr<const std::string> value) {
  // The value, when there is one, goes last with its 4-byte length (Writer::bytes's layout).
  const size_t value_size = value ? value->size() : 0;
  const size_t payload = 1 + fields.size() + (value ? 4 + value_size : 0);
  std::string head = big_endian32(payload);
  head.push_back(static_cast<char>(status));
  head += fields;
  if (value) head += big_endian32(value_size);
  return StoreReply{.head = std::move(head), .value = std::move(value), .refused = {}};
}

StoreReply refusal(std::string why) {
  StoreReply reply = make_reply(Status::Failed, Writer().bytes(why).str());
  reply.refused = std::move(why);
  return reply;
}

StoreTable::StoreTable(StoreLimits limits) : limits_(limits) {}

bool StoreTable::reserve_frame(size_t size) {
  if (size > limits_.max_bytes - held_) return false;
  held_ += size;
  return true;
}

void StoreTable::release_frame(size_t size) {
  held_ -= size;
}

std::optional<StoreReply> StoreTable::refuse_early(std::string_view frame) const {
  const std::optional<int64_t> count = protocol::announced_keys(frame);
  if (!count || *count <= static_cast<int64_t>(limits_.max_keys_per_request)) return {};
  return refusal(too_many_keys(*count, limits_.max_keys_per_request));
}

std::optional<StoreReply> StoreTable::answer(Request& request) {
  const bool many = request.command == Command::Wait || request.command == Command::Check;
  if (many && request.keys.size() > limits_.max_keys_per_request) {
    return refusal(
        too_many_keys(static_cast<int64_t>(request.keys.size()), limits_.max_keys_per_request));
  }
  switch (request.command) {
    case Command::Set: return set(request.keys[0], std::move(request.value));
    case Command::Add: return add(request.keys[0], request.delta);
    case Command::Get: {
      const auto it = data_.find(request.keys[0]);
      if (it == data_.end()) return std::nullopt;
      return make_reply(Status::Ok, {}, it->second);
    }
    case Command::Wait: {
      size_t cursor = 0;
      if (!ready(request, cursor)) return std::nullopt;
      return make_reply(Status::Ok);
    }
    case Command::Check: {
      size_t cursor = 0;
      return make_reply(Status::Ok, Writer().u8(ready(request, cursor) ? 1 : 0).str());
    }
  }
  return refusal("unknown command");
}

bool StoreTable::ready(const Request& request, size_t& cursor) const {
  while (cursor < request.keys.size() && has(request.keys[cursor])) ++cursor;
  return cursor == request.keys.size();
}

StoreReply StoreTable::timed_out(const Request& request) const {
  if (request.command == Command::Get) return make_reply(Status::Timeout);
  std::vector<std::string> missing;
  for (const auto& key : request.keys) {
    if (!has(key)) missing.push_back(key);
  }
  return make_reply(Status::Timeout, Writer().strings(missing).str());
}

StoreReply StoreTable::shutting_down() {
  return make_reply(
      Status::Failed,
      Writer()
          .bytes("the rendezvous store is shutting down (did rank 0 or the launcher exit?)")
          .str());
}

StoreReply StoreTable::set(std::string key, std::string value) {
  const auto it = data_.find(key);
  const size_t old_size = it == data_.end() ? 0 : key.size() + it->second->size();
  const size_t new_size = key.size() + value.size();
  if (new_size > old_size && new_size - old_size > limits_.max_bytes - held_) {
    return refusal("set('" + key.substr(0, 64) + "') of " + std::to_string(new_size) +
                   " bytes does not fit the store's budget of " +
                   std::to_string(limits_.max_bytes) + " bytes");
  }
  held_ = held_ - old_size + new_size;
  auto shared = std::make_shared<const std::string>(std::move(value));
  if (it == data_.end()) {
    data_.emplace(std::move(key), std::move(shared));
    ++generation_;
  } else {
    it->second = std::move(shared);  // a reply being sent keeps the old value alive
  }
  return make_reply(Status::Ok);
}

StoreReply StoreTable::add(const std::string& key, int64_t delta) {
  int64_t value = 0;
  const auto it = data_.find(key);
  if (it != data_.end()) {
    const std::optional<int64_t> counter = protocol::parse_counter(*it->second);
    if (!counter) return make_reply(Status::Failed, Writer().bytes(protocol::kNotACounter).str());
    value = *counter;
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(value, delta, &sum)) {
    return refusal("add('" + key.substr(0, 64) + "', " + std::to_string(delta) + ") to " +
                   std::to_string(value) + " would overflow a 64-bit counter");
  }
  StoreReply stored = set(key, std::to_string(sum));
  if (!stored.refused.empty()) return stored;
  return make_reply(Status::Ok, Writer().i64(sum).str());
}

}  // namespace tandem::parallel
