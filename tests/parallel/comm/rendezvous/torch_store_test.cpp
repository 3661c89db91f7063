// TorchStore, the client of PyTorch's TCPStore used under torchrun's agent store: against the
// real server of Debian's PyTorch 1.13 (the legacy protocol) or of the PyTorch TANDEM_TORCH_PYTHON
// runs (scripts/gpu_node.sh: the GPU node's 2.x, the validated protocol), against a stand-in for
// the validated protocol of later versions, and against servers that speak neither.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "parallel/comm/rendezvous/store_server.h"
#include "parallel/comm/rendezvous/torch_store.h"
#include "tests/support/error_message.h"
#include "tests/support/test_paths.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using tandem::testing::contains;
using tandem::testing::error_message;

// tests/interop/torch_store_peer.py under Debian's python3 (the one with python3-torch), or the
// interpreter TANDEM_TORCH_PYTHON names.
class PyTorchPeer {
 public:
  PyTorchPeer() {
    const char* python = std::getenv("TANDEM_TORCH_PYTHON");
    const std::string command =
        std::string(python != nullptr && *python != '\0' ? python : "/usr/bin/python3") + " " +
        testing::kTorchStorePeerScript + " 2>&1";
    pipe_ = ::popen(command.c_str(), "r");
    if (pipe_ != nullptr) first_line_ = read_line();
  }
  ~PyTorchPeer() {
    if (pipe_ != nullptr) ::pclose(pipe_);
  }
  /// The port its TCPStore listens on, or 0 (no PyTorch: first_line() says why).
  int port() const { return std::atoi(first_line_.c_str()); }
  const std::string& first_line() const { return first_line_; }
  /// The protocol its PyTorch speaks: legacy up to 1.x, validated from 2.2 on; none for 2.0 and
  /// 2.1, which pytorch/pytorch#107607 (August 2023) may or may not be in.
  std::optional<TorchStoreProtocol> protocol() const {
    std::istringstream words(first_line_);
    int port = 0, major = 0, minor = 0;
    char dot = 0;
    if (!(words >> port >> major >> dot >> minor)) return std::nullopt;
    if (major < 2) return TorchStoreProtocol::Legacy;
    if (major > 2 || minor >= 2) return TorchStoreProtocol::Validated;
    return std::nullopt;
  }
  std::string read_line() {
    char line[512] = {};
    return std::fgets(line, sizeof(line), pipe_) != nullptr ? std::string(line) : std::string();
  }

 private:
  FILE* pipe_ = nullptr;
  std::string first_line_;
};

TEST(TorchStore, TradesKeysWithPyTorchsTcpStore) {
  PyTorchPeer peer;
  if (peer.port() <= 0) GTEST_SKIP() << "no PyTorch TCPStore: " << peer.first_line();
  TorchStore store({.port = peer.port(), .timeout = 30s});
  if (const auto expected = peer.protocol()) {  // Debian 12 ships PyTorch 1.13: legacy
    EXPECT_EQ(store.protocol(), *expected) << "PyTorch " << peer.first_line();
  }
  EXPECT_EQ(store.local_address(), "127.0.0.1");

  EXPECT_EQ(store.get("from_python"), Bytes({0, 255, 'b', 'y', 't', 'e', 's'}));
  EXPECT_TRUE(store.check({"from_python", "counter"}));
  EXPECT_FALSE(store.check({"from_python", "nobody_sets_this"}));
  EXPECT_EQ(store.add("counter", 2), 7);            // the Python side added 5
  EXPECT_EQ(to_string(store.get("counter")), "7");  // counters are decimal text on both sides
  store.set("from_tandem", {1, 2, 0, 254});
  store.wait({"python_done"});
  EXPECT_EQ(peer.read_line(), "from_tandem 010200fe counter 7\n");
  store.set("tandem_done", to_bytes("1"));
}

TEST(TorchStore, AWaitThatTimesOutNamesTheKeysAndEndsTheConnection) {
  PyTorchPeer peer;
  if (peer.port() <= 0) GTEST_SKIP() << "no PyTorch TCPStore: " << peer.first_line();
  TorchStore store({.port = peer.port(), .timeout = 30s});
  const std::string message = error_message([&] { store.wait({"missing", "from_python"}, 300ms); });
  EXPECT_TRUE(contains(message, "[store] wait for 'missing', 'from_python' (timeout 300 ms)"))
      << message;
  EXPECT_TRUE(contains(message, "torchrun's store at 127.0.0.1:" + std::to_string(peer.port())))
      << message;
  // The server still owes that wait a reply: the connection cannot be used again.
  EXPECT_TRUE(contains(error_message([&] { store.get("from_python"); }), "was lost earlier"));
  TorchStore again({.port = peer.port(), .timeout = 30s});
  again.set("from_tandem", {});
  again.set("tandem_done", {});
}

// A stand-in for PyTorch's later TCPStore (pytorch/pytorch#107607 on): a client must open with
// VALIDATE (0) and the magic number, or is dropped; SET … GETNUMKEYS are numbered 1 … 7. One
// connection at a time, which the client's protocol detection must cope with.
class ValidatedServer {
 public:
  ValidatedServer() : listener_(net::listen_on("[test]", "127.0.0.1", 0)) {
    thread_ = std::thread([this] { serve(); });
  }
  ~ValidatedServer() {
    stop_ = true;
    ::shutdown(listener_.fd(), SHUT_RDWR);
    thread_.join();
  }
  int port() const { return net::local_port(listener_); }

 private:
  static uint64_t number(const std::string& bytes) {
    uint64_t value = 0;
    for (size_t i = bytes.size(); i-- > 0;) value = (value << 8) | static_cast<uint8_t>(bytes[i]);
    return value;
  }
  static std::string little_endian(uint64_t value) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(value >> (8 * i));
    return out;
  }
  std::string text(const net::Socket& s) {
    return net::receive_exactly("[test]", s, number(net::receive_exactly("[test]", s, 8)));
  }
  bool all_present(const net::Socket& s) {
    bool present = true;
    for (uint64_t n = number(net::receive_exactly("[test]", s, 8)); n > 0; --n) {
      present = values_.count(text(s)) != 0 && present;
    }
    return present;
  }
  void serve() {
    while (!stop_) {
      net::Socket client(::accept(listener_.fd(), nullptr, nullptr));
      if (!client.valid()) return;
      try {
        if (net::receive_exactly("[test]", client, 1)[0] != 0) continue;  // not VALIDATE: drop
        if (number(net::receive_exactly("[test]", client, 4)) != 0x3C85F7CE) continue;
        while (true) {
          const int query = net::receive_exactly("[test]", client, 1)[0];
          if (query == 1) {  // SET
            const std::string key = text(client);
            values_[key] = text(client);
          } else if (query == 3) {  // GET
            const std::string& value = values_.at(text(client));
            net::send_all("[test]", client, little_endian(value.size()) + value);
          } else if (query == 4) {  // ADD
            std::string& value = values_[text(client)];
            const auto delta =
                static_cast<int64_t>(number(net::receive_exactly("[test]", client, 8)));
            value = std::to_string((value.empty() ? 0 : std::stoll(value)) + delta);
            net::send_all("[test]", client,
                          little_endian(static_cast<uint64_t>(std::stoll(value))));
          } else if (query == 5 || query == 6) {  // CHECK, WAIT (keys set by this client only)
            const bool present = all_present(client);
            if (query == 5 || present)
              net::send_all("[test]", client, std::string(1, present ? 0 : 1));
          } else if (query == 7) {  // GETNUMKEYS
            net::send_all("[test]", client, little_endian(values_.size()));
          } else {
            break;
          }
        }
      } catch (const Error&) {  // the client went away
      }
    }
  }

  net::Socket listener_;
  std::atomic<bool> stop_{false};
  std::map<std::string, std::string> values_;
  std::thread thread_;
};

TEST(TorchStore, SpeaksTheValidatedProtocolOfLaterPyTorch) {
  ValidatedServer server;
  TorchStore store({.port = server.port(), .timeout = 10s});
  EXPECT_EQ(store.protocol(), TorchStoreProtocol::Validated);
  store.set("address", to_bytes("10.0.0.2:4242"));
  EXPECT_EQ(to_string(store.get("address")), "10.0.0.2:4242");
  EXPECT_EQ(store.add("arrivals", 1), 1);
  EXPECT_EQ(store.add("arrivals", 2), 3);
  EXPECT_TRUE(store.check({"address", "arrivals"}));
  EXPECT_FALSE(store.check({"absent"}));
}

// Review S6: PyTorch 1.13's store daemon serves one request at a time and reads it whole; the
// validated hello is an incomplete legacy SET that would wedge it. A stand-in legacy server that
// records the first byte of every connection: the client must send it GETNUMKEYS (6) alone.
TEST(TorchStore, ALegacyServerIsNeverSentTheValidatedHello) {
  const net::Socket listener = net::listen_on("[test]", "127.0.0.1", 0);
  std::vector<char> first_bytes;
  std::vector<net::Socket> clients;
  std::atomic<bool> stop{false};
  std::thread server([&] {
    while (!stop) {
      pollfd entry{listener.fd(), POLLIN, 0};
      if (::poll(&entry, 1, 20) <= 0) continue;
      net::Socket client(::accept(listener.fd(), nullptr, nullptr));
      const char query = net::receive_exactly("[test]", client, 1)[0];
      first_bytes.push_back(query);
      if (query == 6) net::send_all("[test]", client, std::string(8, '\0'));  // 0 keys
      clients.push_back(std::move(client));
    }
  });
  {
    TorchStore store({.port = net::local_port(listener), .timeout = 10s});
    EXPECT_EQ(store.protocol(), TorchStoreProtocol::Legacy);
    std::this_thread::sleep_for(300ms);  // any other probe would have come by now
  }
  stop = true;
  server.join();
  EXPECT_EQ(first_bytes, std::vector<char>{6});
}

TEST(TorchStore, ASilentServerIsAnErrorNotAHang) {
  const net::Socket silent = net::listen_on("[test]", "127.0.0.1", 0);  // accepts, never answers
  const int port = net::local_port(silent);
  const std::string message =
      error_message([&] { TorchStore store({.port = port, .timeout = 500ms}); });
  EXPECT_TRUE(contains(message, "did not answer as PyTorch's TCPStore")) << message;
  EXPECT_TRUE(contains(message, "127.0.0.1:" + std::to_string(port))) << message;
}

TEST(TorchStore, TandemsOwnStoreIsNotMistakenForPyTorchs) {
  StoreServer tandem_store;
  const std::string message =
      error_message([&] { TorchStore store({.port = tandem_store.port(), .timeout = 500ms}); });
  EXPECT_TRUE(contains(message, "did not answer as PyTorch's TCPStore")) << message;
}

TEST(TorchStore, RefusesToHostAServer) {
  const std::string message =
      error_message([&] { TorchStore store({.port = 1, .is_server = true, .timeout = 500ms}); });
  EXPECT_TRUE(contains(message, "cannot host one: use TcpStore")) << message;
}

}  // namespace
}  // namespace tandem::parallel
