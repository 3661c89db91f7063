// Only its own job (review S1): the store's handshake with a job token, and where it listens.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <mutex>

#include "parallel/comm/rendezvous/store.h"
#include "parallel/comm/rendezvous/store_auth.h"
#include "parallel/comm/rendezvous/store_protocol.h"
#include "parallel/comm/rendezvous/store_server.h"
#include "tests/support/error_message.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using protocol::Command;
using protocol::Writer;
using tandem::testing::error_message;

const std::string kToken = "0123456789abcdef0123456789abcdef";

std::shared_ptr<TcpStore> client(int port, const std::string& token,
                                 std::chrono::milliseconds timeout = 5s) {
  return std::make_shared<TcpStore>(
      TcpStoreOptions{.port = port, .token = token, .timeout = timeout});
}

net::Socket raw_client(int port) {
  std::string error;
  net::Socket socket = net::connect_with_retry("127.0.0.1", port, 5s, error);
  EXPECT_TRUE(socket.valid()) << error;
  return socket;
}

TEST(StoreAuth, ClientsWithTheJobsTokenJoin) {
  StoreServer server({.token = kToken});
  auto a = client(server.port(), kToken);
  auto b = client(server.port(), kToken);
  a->set("k", to_bytes("v"));
  EXPECT_EQ(to_string(b->get("k")), "v");
}

TEST(StoreAuth, AClientWithoutTheTokenIsRefusedInOneLine) {
  std::mutex mutex;
  std::string logged;
  StoreServer server({.token = kToken, .log = [&](const std::string& line) {
                        std::lock_guard<std::mutex> lock(mutex);
                        logged += line;
                      }});
  const std::string message = error_message([&] { client(server.port(), ""); });
  EXPECT_NE(message.find("has no job token, and this store needs one (set TANDEM_JOB_TOKEN"),
            std::string::npos)
      << message;
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_NE(logged.find("[store] refused: a client at"), std::string::npos) << logged;
}

TEST(StoreAuth, AWrongTokenIsToldApartFromAnotherJobsStore) {
  StoreServer server({.token = kToken});
  const std::string wrong = error_message([&] { client(server.port(), std::string(32, 'x')); });
  EXPECT_NE(wrong.find("does not know this job's token (TANDEM_JOB_TOKEN)"), std::string::npos)
      << wrong;
  StoreServer open_store;
  const std::string other = error_message([&] { client(open_store.port(), kToken); });
  EXPECT_NE(other.find("has no job token, but this process has one"), std::string::npos) << other;
  EXPECT_NE(error_message([&] { client(server.port(), "short"); }).find("at least 16"),
            std::string::npos);
}

// A client that skips the handshake, or fakes it, reads and writes nothing.
TEST(StoreAuth, NoKeyIsReadOrWrittenBeforeTheHandshake) {
  StoreServer server({.token = kToken});
  {  // a Set as the first message
    net::Socket raw = raw_client(server.port());
    net::send_frame(
        "[test]", raw,
        Writer().u8(static_cast<uint8_t>(Command::Set)).bytes("forged").bytes("x").str());
    EXPECT_FALSE(net::receive_frame("[test]", raw, net::deadline_after(5s)).has_value());
  }
  {  // a hello that claims a token, then a made-up proof, then a Set
    net::Socket raw = raw_client(server.port());
    net::send_frame("[test]", raw,
                    Writer().u8(auth::kHello).bytes(std::string(32, 'n')).u8(1).str());
    ASSERT_TRUE(net::receive_frame("[test]", raw, net::deadline_after(5s)).has_value());
    net::send_frame("[test]", raw, Writer().u8(auth::kProve).bytes(std::string(32, 'p')).str());
    const auto reply = net::receive_frame("[test]", raw, net::deadline_after(5s));
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(static_cast<uint8_t>((*reply)[0]), static_cast<uint8_t>(protocol::Status::Failed));
    ::send(raw.fd(), "\0\0\0\1\1", 5, MSG_NOSIGNAL);
    std::optional<std::string> more;
    error_message([&] { more = net::receive_frame("[test]", raw, net::deadline_after(5s)); });
    EXPECT_FALSE(more.has_value());  // closed (or reset): nothing more is answered
  }
  auto rank = client(server.port(), kToken);
  EXPECT_FALSE(rank->check({"forged"}));
}

TEST(StoreAuth, TheTokenNeverCrossesTheWireAndProofsDiffer) {
  const std::string c = auth::random_bytes(auth::kNonceBytes);
  const std::string s = auth::random_bytes(auth::kNonceBytes);
  EXPECT_NE(c, s);
  EXPECT_FALSE(
      auth::same_proof(auth::proof(kToken, "server", c, s), auth::proof(kToken, "client", s, c)));
  EXPECT_TRUE(
      auth::same_proof(auth::proof(kToken, "client", s, c), auth::proof(kToken, "client", s, c)));
  EXPECT_EQ(auth::proof(kToken, "client", s, c).size(), 32u);
  EXPECT_EQ(auth::new_job_token().size(), 64u);
  EXPECT_NE(auth::new_job_token(), auth::new_job_token());
}

// Note [Store address]: which address a store listens on for a job's address.
TEST(StoreAddress, LoopbackJobsStayOnLoopback) {
  EXPECT_EQ(net::listen_host_for("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(net::listen_host_for("127.0.0.5"), "127.0.0.5");
  EXPECT_EQ(net::listen_host_for("::1"), "::1");
  EXPECT_EQ(net::listen_host_for("localhost"), "127.0.0.1");
  EXPECT_EQ(net::listen_host_for("192.0.2.254"), "");  // TEST-NET-1: not this machine's
  EXPECT_EQ(net::listen_host_for(""), "");
}

// This machine's first non-loopback IPv4 address, or "".
std::string outside_address() {
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return "";
  std::string found;
  for (ifaddrs* i = interfaces; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    if ((ntohl(a->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    found = text;
  }
  freeifaddrs(interfaces);
  return found;
}

TEST(StoreAddress, RankZerosStoreForALoopbackUrlIsNotReachableFromOutside) {
  const std::string outside = outside_address();
  if (outside.empty()) GTEST_SKIP() << "no interface besides loopback";
  TcpStore host(TcpStoreOptions{.host = "127.0.0.1", .port = 0, .is_server = true, .timeout = 5s});
  std::string error;
  EXPECT_FALSE(net::connect_with_retry(outside, host.port(), 200ms, error).valid());
  EXPECT_NE(error.find("refused"), std::string::npos) << error;
  // A store for this machine's own address listens there.
  TcpStore named(TcpStoreOptions{.host = outside, .port = 0, .is_server = true, .timeout = 5s});
  EXPECT_TRUE(net::connect_with_retry(outside, named.port(), 2s, error).valid()) << error;
}

}  // namespace
}  // namespace tandem::parallel
