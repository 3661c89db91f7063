// The Store interface (store.h) on every store that implements it: TcpStore, clients of one
// StoreServer, and FileStore, one file with a store per rank. Each test runs on both
// (Stores/StoreInterface.<test>/tcp and /file); what only one of them does is tested in
// store_test.cpp and file_store_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "parallel/comm/rendezvous/file_store.h"
#include "parallel/comm/rendezvous/store.h"
#include "parallel/comm/rendezvous/store_server.h"
#include "tests/support/error_message.h"
#include "tests/support/temp_dir.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using tandem::testing::error_message;

// Makes clients of one store.
class StoreBackend {
 public:
  virtual ~StoreBackend() = default;
  virtual std::shared_ptr<Store> client(std::chrono::milliseconds timeout) = 0;
};

class TcpBackend final : public StoreBackend {
 public:
  std::shared_ptr<Store> client(std::chrono::milliseconds timeout) override {
    return std::make_shared<TcpStore>(TcpStoreOptions{.port = server_.port(), .timeout = timeout});
  }

 private:
  StoreServer server_;
};

// Rank 0 holds the file from the start, as a StoreServer is there before its clients; each
// client is the next rank.
class FileBackend final : public StoreBackend {
 public:
  static constexpr int kRanks = 64;

  std::shared_ptr<Store> client(std::chrono::milliseconds timeout) override {
    return std::make_shared<FileStore>(FileStoreOptions{
        .path = path_, .rank = next_rank_++, .world_size = kRanks, .timeout = timeout});
  }

 private:
  testing::TempDir dir_;
  std::string path_ = dir_.file("store");
  std::atomic<int> next_rank_{1};
  FileStore creator_{{.path = path_, .rank = 0, .world_size = kRanks}};
};

class StoreInterface : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "tcp") {
      backend_ = std::make_unique<TcpBackend>();
    } else {
      backend_ = std::make_unique<FileBackend>();
    }
  }
  std::shared_ptr<Store> client(std::chrono::milliseconds timeout = 10s) {
    return backend_->client(timeout);
  }

 private:
  std::unique_ptr<StoreBackend> backend_;
};

INSTANTIATE_TEST_SUITE_P(Stores, StoreInterface, ::testing::Values("tcp", "file"),
                         [](const auto& info) { return info.param; });

TEST_P(StoreInterface, SetThenGetReturnsTheBytes) {
  auto store = client();
  Bytes binary = {0, 1, 2, 255, 0, 7};
  store->set("binary", binary);
  EXPECT_EQ(store->get("binary"), binary);
  store->set("binary", to_bytes("overwritten"));
  EXPECT_EQ(to_string(store->get("binary")), "overwritten");
  store->set("empty", {});
  EXPECT_TRUE(store->get("empty").empty());
}

TEST_P(StoreInterface, LargeValuesRoundTrip) {
  auto store = client();
  Bytes big(5 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  store->set("big", big);
  EXPECT_EQ(store->get("big"), big);
}

TEST_P(StoreInterface, GetBlocksUntilAnotherClientSetsTheKey) {
  auto reader = client();
  auto writer = client();
  Bytes seen;
  std::thread waiting([&] { seen = reader->get("late"); });
  std::this_thread::sleep_for(100ms);
  writer->set("late", to_bytes("here"));
  waiting.join();
  EXPECT_EQ(to_string(seen), "here");
}

TEST_P(StoreInterface, AddIsAtomicAcrossClients) {
  constexpr int kThreads = 4, kAdds = 50;
  std::vector<std::shared_ptr<Store>> stores;
  for (int t = 0; t < kThreads; ++t) stores.push_back(client());
  std::vector<std::vector<int64_t>> returned(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAdds; ++i) returned[t].push_back(stores[t]->add("counter", 1));
    });
  }
  for (auto& t : threads) t.join();
  // Every add saw a distinct value: together they are exactly 1..200.
  std::vector<int64_t> all;
  for (const auto& r : returned) all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(kThreads * kAdds);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(all, expected);
  auto store = client();
  EXPECT_EQ(store->add("counter", -200), 0);
  EXPECT_EQ(store->add("counter", 5), 5);
  EXPECT_EQ(to_string(store->get("counter")), "5");  // counters are decimal text
}

TEST_P(StoreInterface, AddOnAValueThatIsNotACounterFails) {
  auto store = client();
  store->set("text", to_bytes("abc"));
  const std::string message = error_message([&] { store->add("text", 1); });
  EXPECT_NE(message.find("[store] add('text') failed: the key holds a value that is not an "
                         "integer counter"),
            std::string::npos)
      << message;
  EXPECT_EQ(store->add("fresh", 1), 1);  // the store is still usable
}

TEST_P(StoreInterface, WaitAndCheck) {
  auto store = client();
  auto other = client();
  EXPECT_FALSE(store->check({"a", "b"}));
  std::thread setter([&] {
    other->set("a", to_bytes("1"));
    std::this_thread::sleep_for(50ms);
    other->set("b", to_bytes("2"));
  });
  store->wait({"a", "b"}, 10s);
  setter.join();
  EXPECT_TRUE(store->check({"a", "b"}));
  EXPECT_TRUE(store->check({}));
  EXPECT_FALSE(store->check({"a", "c"}));
}

TEST_P(StoreInterface, GetTimeoutNamesTheKeyAndTheTimeout) {
  auto store = client();
  const std::string message = error_message([&] { store->get("rank1/address", 200ms); });
  EXPECT_NE(message.find("[store] get('rank1/address') timed out after 200 ms: no rank set the "
                         "key (store at "),
            std::string::npos)
      << message;
  // A timeout is an answer, not a broken store.
  store->set("k", to_bytes("v"));
  EXPECT_EQ(to_string(store->get("k")), "v");
}

TEST_P(StoreInterface, WaitTimeoutListsTheMissingKeys) {
  auto store = client();
  store->set("present", {});
  const std::string message = error_message([&] {
    store->wait({"present", "missing1", "missing2"}, 100ms);
  });
  EXPECT_NE(message.find("[store] wait timed out after 100 ms; still missing: 'missing1', "
                         "'missing2'"),
            std::string::npos)
      << message;
}

TEST_P(StoreInterface, ForeverTimeoutsDoNotExpireAtOnce) {
  // Review D7: now + milliseconds::max() overflowed into the past.
  auto store = client(std::chrono::milliseconds::max());
  store->set("k", to_bytes("v"));
  EXPECT_EQ(to_string(store->get("k")), "v");
  store->wait({"k"});
}

TEST_P(StoreInterface, PrefixStoreScopesKeys) {
  auto base = client();
  PrefixStore a("a/", base), b("b/", base);
  a.set("key", to_bytes("from a"));
  b.set("key", to_bytes("from b"));
  EXPECT_EQ(to_string(a.get("key")), "from a");
  EXPECT_EQ(to_string(b.get("key")), "from b");
  EXPECT_EQ(to_string(base->get("a/key")), "from a");
  EXPECT_EQ(a.add("n", 2), 2);
  EXPECT_EQ(b.add("n", 3), 3);
  EXPECT_TRUE(a.check({"key", "n"}));
  EXPECT_FALSE(a.check({"other"}));
  a.wait({"key", "n"}, 1s);
  const std::string message = error_message([&] { b.get("missing", 50ms); });
  EXPECT_NE(message.find("get('b/missing')"), std::string::npos) << message;
}

}  // namespace
}  // namespace tandem::parallel
