#include "parallel/comm/rendezvous/torch_store.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "engine/error.h"

namespace tandem::parallel {

// Legacy numbering; the validated dialect adds one (Note [TCPStore protocol]).
enum class TorchStore::Query : uint8_t {
  Set = 0,
  Get = 2,
  Add = 3,
  Check = 4,
  Wait = 5,
  NumKeys = 6
};

namespace {

constexpr char kTag[] = "[store]";
constexpr uint32_t kValidateMagic = 0x3C85F7CE;
constexpr uint8_t kValidate = 0;
constexpr uint8_t kAllPresent = 0;  // CHECK's READY and WAIT's STOP_WAITING

std::string little_endian(uint64_t value, int bytes = 8) {
  std::string out(static_cast<size_t>(bytes), '\0');
  for (int i = 0; i < bytes; ++i) out[static_cast<size_t>(i)] = static_cast<char>(value >> (8 * i));
  return out;
}

uint64_t from_little_endian(const std::string& bytes) {
  uint64_t value = 0;
  for (size_t i = bytes.size(); i-- > 0;) value = (value << 8) | static_cast<uint8_t>(bytes[i]);
  return value;
}

std::string with_length(const std::string& bytes) {
  return little_endian(bytes.size()) + bytes;
}

// PyTorch's client puts "/" before every key on the wire (TCPStore::keyPrefix_), so that is
// what its users (torchrun's agent, a Python rank) see as the key.
std::string wire_key(const std::string& key) {
  return with_length("/" + key);
}

std::string key_list(const std::vector<std::string>& keys) {
  std::string out = little_endian(keys.size());
  for (const auto& key : keys) out += wire_key(key);
  return out;
}

std::string quoted(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& key : keys) out += (out.empty() ? "'" : ", '") + key + "'";
  return out;
}

std::string address_of(const TcpStoreOptions& options) {
  return options.host + ":" + std::to_string(options.port);
}

net::Socket connect(const TcpStoreOptions& options) {
  std::string last_error;
  net::Socket socket =
      net::connect_with_retry(options.host, options.port, options.timeout, last_error);
  TANDEM_CHECK(socket.valid(), kTag, " could not reach torchrun's rendezvous store at ",
               address_of(options), " after ", net::format_duration(options.timeout),
               " (last error: ", last_error,
               "); torchrun's agent hosts it (TORCHELASTIC_USE_AGENT_STORE=True): is it running?");
  return socket;
}

// Note [TCPStore protocol]: both dialects' GETNUMKEYS at once, on two connections; the one the
// server answers with its 8-byte count is kept.
net::Socket detect_protocol(const TcpStoreOptions& options, TorchStoreProtocol& protocol) {
  net::Socket candidates[2] = {connect(options), connect(options)};
  const TorchStoreProtocol dialects[2] = {TorchStoreProtocol::Legacy,
                                          TorchStoreProtocol::Validated};
  const std::string numkeys_legacy(1, static_cast<char>(6));
  const std::string hello_validated = std::string(1, static_cast<char>(kValidate)) +
                                      little_endian(kValidateMagic, 4) + static_cast<char>(7);
  net::send_all(kTag, candidates[0], numkeys_legacy);
  net::send_all(kTag, candidates[1], hello_validated);

  std::string replies[2];
  bool open[2] = {true, true};
  const auto deadline = net::deadline_after(options.timeout);
  while (open[0] || open[1]) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - net::Clock::now());
    if (left.count() <= 0) break;
    pollfd entries[2];
    for (int i = 0; i < 2; ++i) entries[i] = {open[i] ? candidates[i].fd() : -1, POLLIN, 0};
    const int ready = ::poll(entries, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    TANDEM_CHECK(ready >= 0, kTag, " poll failed while contacting ", address_of(options));
    for (int i = 0; i < 2; ++i) {
      if (!open[i] || entries[i].revents == 0) continue;
      char buffer[8];
      const ssize_t got = ::recv(candidates[i].fd(), buffer, 8 - replies[i].size(), 0);
      if (got <= 0) {  // dropped by a server of the other dialect
        open[i] = false;
        continue;
      }
      replies[i].append(buffer, static_cast<size_t>(got));
      if (replies[i].size() == 8) {
        protocol = dialects[i];
        return std::move(candidates[i]);
      }
    }
  }
  TANDEM_FAIL(kTag, " the server at ", address_of(options),
              " did not answer as PyTorch's TCPStore (either protocol version) within ",
              net::format_duration(options.timeout),
              "; with TORCHELASTIC_USE_AGENT_STORE=True, MASTER_ADDR:MASTER_PORT must be "
              "torchrun's agent store");
}

}  // namespace

TorchStore::TorchStore(TcpStoreOptions options) : options_(std::move(options)) {
  TANDEM_CHECK(!options_.is_server, kTag,
               " is a client of PyTorch's TCPStore and cannot host one: use TcpStore for that");
  TANDEM_CHECK(options_.port > 0 && options_.port <= 65535, kTag, " port ", options_.port,
               " is out of range 1..65535");
  socket_ = detect_protocol(options_, protocol_);
}

std::string TorchStore::address() const {
  return address_of(options_);
}

std::string TorchStore::local_address() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return socket_.valid() ? net::local_address(socket_) : "";
}

char TorchStore::code(Query query) const {
  const int shift = protocol_ == TorchStoreProtocol::Validated ? 1 : 0;
  return static_cast<char>(static_cast<int>(query) + shift);
}

std::string TorchStore::transact(
    const std::string& what, const std::string& request, std::chrono::milliseconds timeout,
    const std::function<std::string(net::Clock::time_point deadline)>& read_reply) {
  std::lock_guard<std::mutex> lock(mutex_);
  TANDEM_CHECK(socket_.valid(), kTag, " the connection to torchrun's store at ", address(),
               " was lost earlier; no further requests are possible");
  try {
    net::send_all(kTag, socket_, request);
    return read_reply(net::deadline_after(timeout));
  } catch (const Error& e) {
    // Half a reply, or one still to come, would be read as the next request's answer.
    socket_.reset();
    TANDEM_FAIL(kTag, " ", what, " on torchrun's store at ", address(), " failed: ", e.message());
  }
}

void TorchStore::set(const std::string& key, const Bytes& value) {
  transact("set('" + key + "')", code(Query::Set) + wire_key(key) + with_length(to_string(value)),
           options_.timeout, [](net::Clock::time_point) { return std::string(); });
}

Bytes TorchStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  wait({key}, timeout);
  const std::string value = transact(
      "get('" + key + "')", code(Query::Get) + wire_key(key), options_.timeout,
      [this](net::Clock::time_point deadline) {
        const uint64_t size = from_little_endian(net::receive_exactly(kTag, socket_, 8, deadline));
        TANDEM_CHECK(size <= net::kMaxFrameBytes, kTag, " refused a value of ", size,
                     " bytes (limit ", net::kMaxFrameBytes, ")");
        return net::receive_exactly(kTag, socket_, static_cast<size_t>(size), deadline);
      });
  return to_bytes(value);
}

int64_t TorchStore::add(const std::string& key, int64_t delta) {
  const std::string reply =
      transact("add('" + key + "')",
               code(Query::Add) + wire_key(key) + little_endian(static_cast<uint64_t>(delta)),
               options_.timeout, [this](net::Clock::time_point deadline) {
                 return net::receive_exactly(kTag, socket_, 8, deadline);
               });
  return static_cast<int64_t>(from_little_endian(reply));
}

void TorchStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  // PyTorch's server has no timeout of its own: it answers once every key exists, so the
  // deadline is ours, and a wait that times out leaves a reply to come (the connection goes).
  const std::string reply = transact(
      "wait for " + quoted(keys) + " (timeout " + net::format_duration(timeout) + ")",
      code(Query::Wait) + key_list(keys), timeout, [this](net::Clock::time_point deadline) {
        return net::receive_exactly(kTag, socket_, 1, deadline);
      });
  TANDEM_CHECK(static_cast<uint8_t>(reply[0]) == kAllPresent, kTag, " wait for ", quoted(keys),
               " got an unexpected reply ", static_cast<int>(static_cast<uint8_t>(reply[0])));
}

bool TorchStore::check(const std::vector<std::string>& keys) {
  const std::string reply =
      transact("check(" + quoted(keys) + ")", code(Query::Check) + key_list(keys), options_.timeout,
               [this](net::Clock::time_point deadline) {
                 return net::receive_exactly(kTag, socket_, 1, deadline);
               });
  return static_cast<uint8_t>(reply[0]) == kAllPresent;
}

}  // namespace tandem::parallel
