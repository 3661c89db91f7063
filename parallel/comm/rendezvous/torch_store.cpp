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

enum class ProbeReply { Answered, Dropped, Silent };

// Sends `request` on a new connection and waits, until `deadline`, for GETNUMKEYS' 8-byte count.
// Answered: `socket` is the store's connection from then on.
ProbeReply probe(const TcpStoreOptions& options, net::Socket& socket, const std::string& request,
                 net::Clock::time_point deadline) {
  socket = connect(options);
  net::send_all(kTag, socket, request);
  std::string reply;
  while (reply.size() < 8) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - net::Clock::now());
    if (left.count() <= 0) return ProbeReply::Silent;
    pollfd entry{socket.fd(), POLLIN, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno == EINTR) continue;
    TANDEM_CHECK(ready >= 0, kTag, " poll failed while contacting ", address_of(options));
    if (ready == 0) continue;
    char buffer[8];
    const ssize_t got = ::recv(socket.fd(), buffer, 8 - reply.size(), 0);
    if (got <= 0) return ProbeReply::Dropped;  // a server of the other dialect
    reply.append(buffer, static_cast<size_t>(got));
  }
  return ProbeReply::Answered;
}

// Note [TCPStore protocol]: the legacy GETNUMKEYS first, alone; the validated hello only once a
// server has dropped it. The hello is an incomplete legacy SET, and PyTorch 1.13's store daemon
// is one thread that reads a whole request with a blocking recv: sent to it beside the legacy
// probe (as both once were, on two connections at once), it could be read first and wedge
// torchrun's store for every client until this one gave up (review S6).
net::Socket detect_protocol(const TcpStoreOptions& options, TorchStoreProtocol& protocol) {
  const auto deadline = net::deadline_after(options.timeout);
  const std::string numkeys_legacy(1, static_cast<char>(6));
  const std::string hello_validated = std::string(1, static_cast<char>(kValidate)) +
                                      little_endian(kValidateMagic, 4) + static_cast<char>(7);
  net::Socket socket;
  ProbeReply reply = probe(options, socket, numkeys_legacy, deadline);
  protocol = TorchStoreProtocol::Legacy;
  if (reply == ProbeReply::Dropped) {
    reply = probe(options, socket, hello_validated, deadline);
    protocol = TorchStoreProtocol::Validated;
  }
  TANDEM_CHECK(reply == ProbeReply::Answered, kTag, " the server at ", address_of(options),
               " did not answer as PyTorch's TCPStore (either protocol version) within ",
               net::format_duration(options.timeout),
               "; with TORCHELASTIC_USE_AGENT_STORE=True, MASTER_ADDR:MASTER_PORT must be "
               "torchrun's agent store");
  return socket;
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
