// init_process_group's init methods (init_method.h): the URLs parsed once, their bad forms each a
// one-line error, the rank and world size each takes, and ranks started by hand meeting over
// tcp:// and file:// (Note [Local ranks by hand]).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "engine/tandem.h"
#include "parallel/comm/init_process_group.h"
#include "parallel/comm/rendezvous/init_method.h"
#include "parallel/comm/rendezvous/rendezvous.h"
#include "tests/support/error_message.h"
#include "tests/support/free_port.h"
#include "tests/support/spawn_ranks.h"
#include "tests/support/temp_dir.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using tandem::testing::contains;
using tandem::testing::error_message;

EnvLookup lookup_in(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const std::string& name) -> std::optional<std::string> {
    const auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  };
}

TEST(InitMethod, ParsesTheThreeForms) {
  EXPECT_EQ(parse_init_method("env://").kind, InitMethod::Kind::Env);
  const InitMethod tcp = parse_init_method("tcp://10.1.1.20:23456");
  EXPECT_EQ(tcp.kind, InitMethod::Kind::Tcp);
  EXPECT_EQ(tcp.host, "10.1.1.20");
  EXPECT_EQ(tcp.port, 23456);
  EXPECT_EQ(parse_init_method("tcp://node0:29500/").host, "node0");
  const InitMethod v6 = parse_init_method("tcp://[fd00::1]:29500");
  EXPECT_EQ(v6.host, "fd00::1");
  EXPECT_EQ(v6.port, 29500);
  const InitMethod file = parse_init_method("file:///mnt/nfs/sharedfile");
  EXPECT_EQ(file.kind, InitMethod::Kind::File);
  EXPECT_EQ(file.path, "/mnt/nfs/sharedfile");
  EXPECT_EQ(file.url, "file:///mnt/nfs/sharedfile");
}

TEST(InitMethod, MalformedUrlsAreOneLineErrors) {
  const std::map<std::string, std::string> cases = {
      {"", "'' is not a URL; expected env://, tcp://HOST:PORT or file:///PATH"},
      {"node0:29500", "'node0:29500' is not a URL; expected env://"},
      {"udp://node0:29500", "has the unknown scheme 'udp'; expected env://"},
      {"env://node0", "has something after env://"},
      {"tcp://node0", "'tcp://node0' has no port: expected tcp://HOST:PORT"},
      {"tcp://:29500", "has no host: expected tcp://HOST:PORT"},
      {"tcp://node0:0", "has port '0': expected a number in 1..65535"},
      {"tcp://node0:65536", "has port '65536': expected a number in 1..65535"},
      {"tcp://node0:http", "has port 'http'"},
      {"tcp://fd00::1:29500", "an IPv6 address goes in brackets, tcp://[ADDRESS]:PORT"},
      {"tcp://[fd00::1", "never closes it"},
      {"tcp://node0:29500?rank=1", "has a query; give the rank and the world size as arguments"},
      {"file://", "has no path: expected file:///PATH"},
      {"file://tmp/store",
       "is not file:///PATH: file:// is followed by an absolute path, three "
       "slashes in all (file:///tmp/store)"},
      {"file:///mnt/nfs/", "names a folder; the store is a file in it"},
  };
  for (const auto& [url, expected] : cases) {
    const std::string message = error_message([&] { parse_init_method(url); });
    EXPECT_TRUE(contains(message, "[init_method] ")) << url << ": " << message;
    EXPECT_TRUE(contains(message, expected)) << url << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(InitMethod, RankAndWorldSize) {
  const InitMethod tcp = parse_init_method("tcp://node0:29500");
  const InitMethod env = parse_init_method("env://");
  check_rank_and_world_size(tcp, 2, 3);
  check_rank_and_world_size(env, -1, -1);
  check_rank_and_world_size(env, 0, 1);
  EXPECT_TRUE(contains(error_message([&] { check_rank_and_world_size(tcp, -1, -1); }),
                       "[init_method] tcp://node0:29500 needs this process's rank and the world "
                       "size: without a launcher, each rank is started by hand"));
  EXPECT_TRUE(contains(error_message([&] { check_rank_and_world_size(tcp, 1, -1); }),
                       "needs this process's rank and the world size"));
  EXPECT_TRUE(contains(error_message([&] { check_rank_and_world_size(env, 1, -1); }),
                       "[init_method] env:// takes a rank and a world size together, or neither"));
  EXPECT_TRUE(contains(error_message([&] { check_rank_and_world_size(tcp, 2, 2); }),
                       "[init_method] rank 2 is out of range for world size 2 (ranks are 0..1)"));
  EXPECT_TRUE(contains(error_message([&] { check_rank_and_world_size(tcp, 0, 0); }),
                       "[init_method] world size 0 must be at least 1"));
}

TEST(InitMethod, RanksStartedByHandKnowNoLocalRanks) {
  const DistributedEnv tcp =
      rendezvous_env({.init_method = "tcp://10.1.1.20:23456", .rank = 1, .world_size = 3});
  EXPECT_EQ(tcp.rank, 1);
  EXPECT_EQ(tcp.world_size, 3);
  EXPECT_EQ(tcp.master_addr, "10.1.1.20");
  EXPECT_EQ(tcp.master_port, 23456);
  EXPECT_EQ(tcp.store_host, StoreHost::Rank0);
  EXPECT_EQ(tcp.rendezvous_url, "tcp://10.1.1.20:23456");
  EXPECT_FALSE(tcp.local_ranks_known());
  EXPECT_EQ(worker_store_prefix(tcp), "");
  const DistributedEnv file =
      rendezvous_env({.init_method = "file:///mnt/nfs/job", .rank = 0, .world_size = 2});
  EXPECT_EQ(file.store_host, StoreHost::File);
  EXPECT_EQ(file.store_file, "/mnt/nfs/job");
  EXPECT_FALSE(file.local_ranks_known());
  EXPECT_EQ(worker_store_prefix(file), "");
}

TEST(InitMethod, EnvTakesALaunchersVariablesAndAGivenRankMustAgree) {
  const EnvLookup launcher = lookup_in(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
  const DistributedEnv env = rendezvous_env({}, launcher);
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_TRUE(env.local_ranks_known());
  EXPECT_EQ(rendezvous_env({.rank = 1, .world_size = 2}, launcher).rank, 1);
  EXPECT_TRUE(contains(
      error_message([&] { rendezvous_env({.rank = 0, .world_size = 2}, launcher); }),
      "[init_method] rank 0 of 2 was given, but the launcher's variables (torchrun) say rank 1 "
      "of 2"));
  // Without a launcher a given rank stands in for RANK, as in PyTorch; MASTER_* still count.
  const EnvLookup master = lookup_in({{"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(rendezvous_env({.rank = 1, .world_size = 4}, master).rank, 1);
  EXPECT_TRUE(
      contains(error_message([&] { rendezvous_env({.rank = 1, .world_size = 4}, lookup_in({})); }),
               "[env] MASTER_ADDR is not set"));
}

TEST(InitMethod, MachineIdentityIsStableAndNamesTheHost) {
  EXPECT_EQ(machine_identity(), machine_identity());
  EXPECT_TRUE(contains(machine_identity(), " host:")) << machine_identity();
}

// --- ranks started by hand (TANDEM_RUN_AS_RANKS runs the body in every rank; the launcher's
// variables give each its rank and a free port, and are otherwise ignored)

void check_sum_of_ranks(ProcessGroup& group) {
  Tensor value = from_vector<float>({static_cast<float>(group.rank())}, {1});
  group.allreduce({value}, ReduceOp::Sum)->wait();
  const int n = group.size();
  EXPECT_EQ(value.to_vector<float>()[0], static_cast<float>(n * (n - 1) / 2));
}

TEST(InitMethodMultiprocess, TcpRanksStartedByHandMeetAndAllreduce) {
  TANDEM_RUN_AS_RANKS(3, testing::SpawnOptions{.launcher_hosts_store = false});
  const DistributedEnv launched = from_environment();
  const std::string url = "tcp://127.0.0.1:" + std::to_string(launched.master_port);
  auto group = init_process_group(
      "gloo", {.init_method = url, .rank = launched.rank, .world_size = launched.world_size},
      {.timeout = 20s});
  EXPECT_EQ(group->rank(), launched.rank);
  EXPECT_EQ(group->size(), 3);
  check_sum_of_ranks(*group);
}

TEST(InitMethodMultiprocess, FileRanksStartedByHandFindTheirLocalRanks) {
  if (!testing::launched_as_rank()) {
    testing::TempDir dir;
    const std::string path = dir.file("store");
    EXPECT_TRUE(testing::ranks_passed(
        testing::spawn_ranks(3, testing::current_test_filter(),
                             {.timeout = 60s, .env = {{"TANDEM_TEST_FILE_STORE", path}}})));
    EXPECT_FALSE(std::filesystem::exists(path)) << "the last rank out did not remove the file";
    return;
  }
  const DistributedEnv launched = from_environment();
  const DistributedEnv env =
      rendezvous_env({.init_method = std::string("file://") + std::getenv("TANDEM_TEST_FILE_STORE"),
                      .rank = launched.rank,
                      .world_size = launched.world_size});
  Rendezvous met = meet(env, 20s);
  EXPECT_EQ(met.env.local_rank, launched.rank);  // all three on this machine
  EXPECT_EQ(met.env.local_world_size, 3);
  auto group = init_process_group("gloo", std::move(met), {.timeout = 20s});
  check_sum_of_ranks(*group);
}

TEST(InitMethodMultiprocess, RanksGivenOtherWorldSizesBothFailInOneLine) {
  const auto result = testing::spawn_ranks(
      2, testing::current_test_filter() + "Rank",
      {.timeout = 60s, .stop_on_failure = false, .launcher_hosts_store = false});
  ASSERT_EQ(result.exit_codes.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(result.exit_codes[rank], 0) << result.output;
    EXPECT_TRUE(contains(result.output_of(rank), "was started for ")) << result.output_of(rank);
  }
  EXPECT_TRUE(contains(result.output_of(1),
                       "[process_group] rank 1 was started for 3 ranks but "
                       "rank 0 for 2: every rank must be given the same "
                       "world size"))
      << result.output;
}

TEST(InitMethodMultiprocess, RanksGivenOtherWorldSizesBothFailInOneLineRank) {
  TANDEM_SKIP_UNLESS_RANK();
  const DistributedEnv launched = from_environment();
  const std::string url = "tcp://127.0.0.1:" + std::to_string(launched.master_port);
  const int world_size = launched.rank == 0 ? 2 : 3;
  init_process_group("gloo", {.init_method = url, .rank = launched.rank, .world_size = world_size},
                     {.timeout = 20s});
}

}  // namespace
}  // namespace tandem::parallel
