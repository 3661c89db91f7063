#include "parallel/comm/rendezvous/store.h"

#include <thread>

#include "engine/error.h"
#include "parallel/comm/rendezvous/store_auth.h"
#include "parallel/comm/rendezvous/store_protocol.h"

namespace tandem::parallel {
namespace {

using protocol::Command;
using protocol::Reader;
using protocol::Status;
using protocol::Writer;

// How long past the server-side wait the client keeps listening for the reply: covers the
// network, not the server's own timeout.
constexpr std::chrono::milliseconds kReplySlack{10000};

}  // namespace

std::string quoted_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "'" : ", '") + key + "'";
  return out;
}

Store::~Store() = default;

// --- TcpStore

TcpStore::TcpStore(TcpStoreOptions options) : options_(std::move(options)) {
  auth::check_token(options_.token);
  if (options_.is_server) {
    server_ = std::make_unique<StoreServer>(
        StoreServerOptions{.host = net::listen_host_for(options_.host),
                           .port = options_.port,
                           .token = options_.token});
    options_.port = server_->port();
  }
  TANDEM_CHECK(options_.port > 0 && options_.port <= 65535, "[store] port ", options_.port,
               " is out of range 1..65535");
  // A server that is out of descriptors, or full of connections that never spoke, may close a
  // new connection before its handshake: that is retried like a refused connect, until timeout.
  const auto deadline = net::deadline_after(options_.timeout);
  std::string last_error;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::max(deadline - net::Clock::now(), net::Clock::duration::zero()));
    socket_ = net::connect_with_retry(options_.host, options_.port, left, last_error);
    if (socket_.valid()) {
      try {
        const std::string refused = introduce();
        TANDEM_CHECK(refused.empty(), "[store] ", refused);
        return;
      } catch (const Error& e) {
        if (socket_.valid()) throw;  // refused by the store itself: final
        last_error = e.message();
      }
    }
    TANDEM_CHECK(net::Clock::now() < deadline, "[store] could not reach the rendezvous store at ",
                 address(), " after ", net::format_duration(options_.timeout),
                 " (last error: ", last_error, "); is rank 0 (or tandem-run) running, and is ",
                 options_.named_by, " its address?");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Note [Store handshake] in store_auth.h, the client's side. Returns why the store and this
// client do not belong together ("" when they do); a lost connection throws (and resets socket_).
std::string TcpStore::introduce() {
  const std::string nonce = auth::random_bytes(auth::kNonceBytes);
  const bool has_token = !options_.token.empty();
  const std::string hello =
      round_trip(Writer().u8(auth::kHello).bytes(nonce).u8(has_token ? 1 : 0).str(),
                 std::chrono::milliseconds(0));
  Reader reply(hello);
  if (static_cast<Status>(reply.u8()) != Status::Ok) {
    return "the rendezvous store at " + address() + " " + reply.bytes();
  }
  const std::string server_nonce = reply.bytes();
  const bool server_has_token = reply.u8() != 0;
  const std::string server_proof = reply.bytes();
  if (!server_has_token && !has_token) return "";
  if (!server_has_token) {
    return "the rendezvous store at " + address() +
           " has no job token, but this process has one (" + auth::kTokenVariable +
           "): is it this job's store? Give every node the same token, or none";
  }
  if (!auth::same_proof(server_proof, auth::proof(options_.token, "server", nonce, server_nonce))) {
    return "the rendezvous store at " + address() + " does not know this job's token (" +
           auth::kTokenVariable +
           "): it belongs to another job, or the token differs between nodes";
  }
  const std::string proved =
      round_trip(Writer()
                     .u8(auth::kProve)
                     .bytes(auth::proof(options_.token, "client", server_nonce, nonce))
                     .str(),
                 std::chrono::milliseconds(0));
  Reader answer(proved);
  if (static_cast<Status>(answer.u8()) != Status::Ok) {
    return "the rendezvous store at " + address() + " " + answer.bytes();
  }
  return "";
}

TcpStore::~TcpStore() = default;

std::string TcpStore::address() const {
  return options_.host + ":" + std::to_string(options_.port);
}

std::string TcpStore::local_address() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return socket_.valid() ? net::local_address(socket_) : "";
}

std::string TcpStore::round_trip(const std::string& request,
                                 std::chrono::milliseconds server_wait) {
  std::lock_guard<std::mutex> lock(mutex_);
  TANDEM_CHECK(socket_.valid(), "[store] the connection to the rendezvous store at ", address(),
               " was lost earlier; no further requests are possible");
  try {
    net::send_frame("[store]", socket_, request);
    auto reply = net::receive_frame("[store]", socket_,
                                    server_wait >= std::chrono::milliseconds::max() - kReplySlack
                                        ? net::Clock::time_point::max()
                                        : net::deadline_after(server_wait + kReplySlack));
    TANDEM_CHECK(reply.has_value(), "[store] the rendezvous store at ", address(),
                 " closed the connection (did rank 0 or the launcher exit?)");
    return std::move(*reply);
  } catch (const Error& e) {
    // The stream may hold half a message now; it cannot be trusted again.
    socket_.reset();
    TANDEM_FAIL("[store] request to the rendezvous store at ", address(), " failed: ", e.message());
  }
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  Writer request;
  request.u8(static_cast<uint8_t>(Command::Set)).bytes(key).bytes(to_string(value));
  const std::string text = round_trip(request.str(), std::chrono::milliseconds(0));
  Reader reply(text);
  if (static_cast<Status>(reply.u8()) != Status::Ok) {
    TANDEM_FAIL("[store] set('", key, "') failed: ", reply.bytes());
  }
}

Bytes TcpStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  Writer request;
  request.u8(static_cast<uint8_t>(Command::Get)).bytes(key).i64(timeout.count());
  const std::string text = round_trip(request.str(), timeout);
  Reader reply(text);
  const auto status = static_cast<Status>(reply.u8());
  if (status == Status::Failed) TANDEM_FAIL("[store] get('", key, "') failed: ", reply.bytes());
  TANDEM_CHECK(status == Status::Ok, "[store] get('", key, "') timed out after ",
               net::format_duration(timeout), ": no rank set the key (store at ", address(), ")");
  return to_bytes(reply.bytes());
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  Writer request;
  request.u8(static_cast<uint8_t>(Command::Add)).bytes(key).i64(delta);
  const std::string text = round_trip(request.str(), std::chrono::milliseconds(0));
  Reader reply(text);
  if (static_cast<Status>(reply.u8()) != Status::Ok) {
    TANDEM_FAIL("[store] add('", key, "') failed: ", reply.bytes());
  }
  return reply.i64();
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Writer request;
  request.u8(static_cast<uint8_t>(Command::Wait)).strings(keys).i64(timeout.count());
  const std::string text = round_trip(request.str(), timeout);
  Reader reply(text);
  const auto status = static_cast<Status>(reply.u8());
  if (status == Status::Failed) TANDEM_FAIL("[store] wait failed: ", reply.bytes());
  if (status != Status::Ok) {
    TANDEM_FAIL("[store] wait timed out after ", net::format_duration(timeout),
                "; still missing: ", quoted_keys(reply.strings()), " (store at ", address(), ")");
  }
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  Writer request;
  request.u8(static_cast<uint8_t>(Command::Check)).strings(keys);
  const std::string text = round_trip(request.str(), std::chrono::milliseconds(0));
  Reader reply(text);
  if (static_cast<Status>(reply.u8()) != Status::Ok) {
    TANDEM_FAIL("[store] check failed: ", reply.bytes());
  }
  return reply.u8() != 0;
}

// --- PrefixStore

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : prefix_(std::move(prefix)), store_(std::move(store)) {
  TANDEM_CHECK(store_ != nullptr, "[store] PrefixStore('", prefix_, "') needs a store");
}

std::vector<std::string> PrefixStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys) out.push_back(prefix_ + key);
  return out;
}

void PrefixStore::set(const std::string& key, const Bytes& value) {
  store_->set(prefix_ + key, value);
}

Bytes PrefixStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return store_->get(prefix_ + key, timeout);
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return store_->add(prefix_ + key, delta);
}

void PrefixStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  store_->wait(prefixed(keys), timeout);
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  return store_->check(prefixed(keys));
}

}  // namespace tandem::parallel
