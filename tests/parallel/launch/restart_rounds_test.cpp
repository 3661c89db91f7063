#include "parallel/launch/restart_rounds.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "parallel/comm/rendezvous/store.h"
#include "parallel/comm/rendezvous/store_server.h"
#include "tests/support/error_message.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using tandem::testing::contains;
using tandem::testing::error_message;

const auto never_cancelled = [] { return false; };

// The launchers of an `nnodes`-node job, each a client of one in-process store.
class RestartRoundsTest : public ::testing::Test {
 protected:
  RestartRounds node(int rank, int nnodes = 2, std::chrono::milliseconds rdzv_timeout = 20s,
                     std::chrono::milliseconds lost_after = 200ms) {
    return RestartRounds(client(), {.nnodes = nnodes,
                                    .node_rank = rank,
                                    .rdzv_timeout = rdzv_timeout,
                                    .poll_interval = 5ms,
                                    .lost_after = lost_after,
                                    .identity = "launcher " + std::to_string(++launchers_)});
  }
  std::shared_ptr<Store> client() {
    return std::make_shared<TcpStore>(TcpStoreOptions{.port = server_.port(), .timeout = 20s});
  }
  // Joins on another thread, as the other machine's launcher would.
  static std::future<std::optional<int>> join_async(RestartRounds& rounds) {
    return std::async(std::launch::async, [&rounds] { return rounds.join(never_cancelled); });
  }
  // Both launchers of a two-node job join round `round` together.
  static void join_both(RestartRounds& node0, RestartRounds& node1, int round = 0) {
    auto first = join_async(node0);
    ASSERT_EQ(node1.join(never_cancelled), round);
    ASSERT_EQ(first.get(), round);
  }
  std::string round_counter() { return to_string(client()->get("tandem-run/round", 5s)); }

  StoreServer server_;
  int launchers_ = 0;
};

TEST_F(RestartRoundsTest, EveryNodeStartsTheSameRoundOnceAllHaveJoined) {
  RestartRounds node0 = node(0), node1 = node(1);
  auto first = join_async(node0);
  EXPECT_EQ(first.wait_for(100ms), std::future_status::timeout);  // node 1 is not there yet
  EXPECT_EQ(node1.join(never_cancelled), 0);
  EXPECT_EQ(first.get(), 0);
  EXPECT_FALSE(node0.closed());
  EXPECT_FALSE(node1.closed());
}

TEST_F(RestartRoundsTest, ClosingMovesEveryNodeToTheNextRoundExactlyOnce) {
  RestartRounds node0 = node(0), node1 = node(1);
  join_both(node0, node1);
  node1.close();  // a worker failed on node 1
  EXPECT_TRUE(node0.closed());
  node0.close();  // node 0 gives up on the round too: the counter must not move twice
  node1.close();
  EXPECT_EQ(round_counter(), "1");
  auto second = join_async(node0);
  EXPECT_EQ(node1.join(never_cancelled), 1);
  EXPECT_EQ(second.get(), 1);
  EXPECT_EQ(node0.round(), 1);
  EXPECT_FALSE(node0.closed());
}

// A launcher killed and started again by hand finds its old round running without it: it closes
// it, so every node starts the next one together.
TEST_F(RestartRoundsTest, ALateJoinerClosesTheRunningRound) {
  RestartRounds node0 = node(0), node1 = node(1);
  join_both(node0, node1);
  RestartRounds restarted1 = node(1);
  auto late = join_async(restarted1);  // node 1's first launcher is silent: taken for dead
  EXPECT_EQ(late.wait_for(600ms), std::future_status::timeout);  // waits for node 0 in round 1
  EXPECT_TRUE(node0.closed());
  EXPECT_EQ(node0.join(never_cancelled), 1);
  EXPECT_EQ(late.get(), 1);
}

TEST_F(RestartRoundsTest, TheRendezvousTimeoutNamesTheMissingNodes) {
  RestartRounds node0 = node(0, 3, 300ms);
  const std::string message = error_message([&] { node0.join(never_cancelled); });
  EXPECT_TRUE(contains(message,
                       "[tandem-run] node 0: the other nodes did not join attempt 0 "
                       "within --rdzv-timeout (300 ms); missing: node 1, 2"))
      << message;
}

// Note [Elastic rounds]: with --nnodes 2:3 two nodes start a round once the last call has
// passed, numbered densely; a third that comes later ends it, and the next round has all three.
TEST_F(RestartRoundsTest, AnElasticRoundStartsWithWhoeverCameAndALateNodeEndsIt) {
  const auto elastic = [&](int id) {
    return RestartRounds(client(), {.nnodes = 3,
                                    .min_nodes = 2,
                                    .node_rank = id,
                                    .last_call = 100ms,
                                    .rdzv_timeout = 20s,
                                    .poll_interval = 5ms});
  };
  RestartRounds node0 = elastic(0), node2 = elastic(2);
  auto first = join_async(node0);
  EXPECT_EQ(first.wait_for(150ms), std::future_status::timeout);  // one node is not enough
  EXPECT_EQ(node2.join(never_cancelled), 0);
  EXPECT_EQ(first.get(), 0);
  EXPECT_EQ(node0.members(), (std::vector<int>{0, 2}));
  EXPECT_EQ(node2.members(), node0.members());
  EXPECT_EQ(node2.group_rank(), 1);  // dense: node 2 is the second of two
  RestartRounds node1 = elastic(1);
  auto late = join_async(node1);
  EXPECT_EQ(late.wait_for(100ms), std::future_status::timeout);  // waits in round 1
  EXPECT_TRUE(node0.closed());
  auto again0 = join_async(node0);
  EXPECT_EQ(node2.join(never_cancelled), 1);
  EXPECT_EQ(again0.get(), 1);
  EXPECT_EQ(late.get(), 1);
  EXPECT_EQ(node1.members(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(node1.group_rank(), 1);
  EXPECT_EQ(node2.group_rank(), 2);
}

// Note [Members confirm]: node 2's launcher takes its ticket and dies before the round starts.
// It is sealed among the members, never confirms, and the round is closed after
// confirm_timeout: the next one starts without it (not after the workers' own timeout).
TEST_F(RestartRoundsTest, ANodeLostWhileTheRoundFormsIsLeftOutOfTheNext) {
  const auto elastic = [&](int id) {
    return RestartRounds(client(), {.nnodes = 3,
                                    .min_nodes = 2,
                                    .node_rank = id,
                                    .last_call = 50ms,
                                    .rdzv_timeout = 20s,
                                    .confirm_timeout = 200ms,
                                    .poll_interval = 5ms});
  };
  auto lost = client();  // what node 2's launcher did before it was SIGKILLed
  ASSERT_EQ(lost->add("tandem-run/round/0/joined", 1), 1);
  lost->set("tandem-run/round/0/ticket/1", to_bytes("2"));
  lost->set("tandem-run/round/0/node/2", to_bytes("1"));
  RestartRounds node0 = elastic(0), node1 = elastic(1);
  auto first = join_async(node0);
  EXPECT_EQ(node1.join(never_cancelled), 1);
  EXPECT_EQ(first.get(), 1);
  EXPECT_EQ(node0.members(), (std::vector<int>{0, 1}));
  EXPECT_EQ(node1.members(), node0.members());
  EXPECT_FALSE(node0.closed());
}

TEST_F(RestartRoundsTest, TooFewNodesForAnElasticRoundEndInOneLineNamingTheMissing) {
  RestartRounds node1(client(), {.nnodes = 3,
                                 .min_nodes = 2,
                                 .node_rank = 1,
                                 .last_call = 10ms,
                                 .rdzv_timeout = 300ms,
                                 .poll_interval = 5ms});
  const std::string message = error_message([&] { node1.join(never_cancelled); });
  EXPECT_TRUE(contains(message,
                       "[tandem-run] node 1: only 1 of at least 2 nodes (--nnodes 2:3) joined "
                       "attempt 0 within --rdzv-timeout (300 ms); missing: node 0, 2"))
      << message;
}

TEST_F(RestartRoundsTest, AnEndedJobFailsTheNextJoinSayingWhy) {
  RestartRounds node0 = node(0), node1 = node(1);
  join_both(node0, node1);
  node1.end_job("node 1 gave up after 3 restarts (--max-restarts 3)");
  EXPECT_TRUE(node0.closed());
  const std::string message = error_message([&] { node0.join(never_cancelled); });
  EXPECT_TRUE(contains(message,
                       "[tandem-run] node 0 cannot start another attempt: node 1 gave "
                       "up after 3 restarts"))
      << message;
}

TEST_F(RestartRoundsTest, ACancelledJoinReturnsNothing) {
  RestartRounds node0 = node(0);
  EXPECT_EQ(node0.join([] { return true; }), std::nullopt);
}

TEST_F(RestartRoundsTest, NodeZeroFinishesOnceEveryNodeHas) {
  RestartRounds node0 = node(0, 2, 20s, 20s), node1 = node(1);
  join_both(node0, node1);
  auto finished0 = std::async(std::launch::async, [&] { return node0.finish(); });
  EXPECT_EQ(finished0.wait_for(100ms), std::future_status::timeout);  // keeps the store up
  EXPECT_EQ(node1.finish(), std::nullopt);
  ASSERT_EQ(finished0.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(finished0.get(), std::nullopt);
}

// Note [Round values]: a members value that is not what a launcher writes ends the job on every
// node in one line naming the key and the store (it used to escape as "stoll").
TEST_F(RestartRoundsTest, AMalformedMemberListEndsTheJobOnEveryNodeNamingTheKey) {
  RestartRounds node0 = node(0), node1 = node(1);
  client()->set("tandem-run/round/0/members", to_bytes("x;y"));
  const std::string message = error_message([&] { node0.join(never_cancelled); });
  EXPECT_TRUE(contains(message, "holds \"x;y\" under tandem-run/round/0/members, which should be"))
      << message;
  EXPECT_TRUE(contains(message, "the rendezvous store")) << message;
  const std::string other = error_message([&] { node1.join(never_cancelled); });
  EXPECT_TRUE(
      contains(other, "[tandem-run] node 1 cannot start another attempt: node 0 stopped the job: "))
      << other;
  EXPECT_TRUE(contains(other, "tandem-run/round/0/members")) << other;
}

// A well-formed but forged list that leaves out a node whose ticket it seals in: that node
// refuses it, and the job ends, instead of node 0 running alone as a 1-node job.
TEST_F(RestartRoundsTest, AForgedMemberListWithoutThisNodeIsRefused) {
  RestartRounds node0 = node(0), node1 = node(1);
  client()->set("tandem-run/round/0/members", to_bytes("2;0"));
  const std::string message = error_message([&] { node1.join(never_cancelled); });
  EXPECT_TRUE(contains(message,
                       "holds \"2;0\" under tandem-run/round/0/members, which leaves "
                       "out node 1 although its ticket 1 was sealed in"))
      << message;
  const std::string other = error_message([&] { node0.join(never_cancelled); });
  EXPECT_TRUE(contains(other, "node 1 stopped the job")) << other;
}

TEST_F(RestartRoundsTest, AMalformedTicketEndsTheJobNamingIt) {
  auto forger = client();
  ASSERT_EQ(forger->add("tandem-run/round/0/joined", 1), 1);
  forger->set("tandem-run/round/0/ticket/1", to_bytes("1abc"));
  RestartRounds node0 = node(0);
  const std::string message = error_message([&] { node0.join(never_cancelled); });
  EXPECT_TRUE(contains(message,
                       "holds \"1abc\" under tandem-run/round/0/ticket/1, which should "
                       "be a whole number from 0 to 1"))
      << message;
}

// Note [Node claims]: a second launcher given --node-rank 1 while the first is alive is refused
// in one line naming both; the first goes on.
TEST_F(RestartRoundsTest, ASecondLauncherWithTheSameNodeRankIsRefusedNamingBoth) {
  RestartRounds node0 = node(0), node1 = node(1);
  join_both(node0, node1);
  std::atomic<bool> stop{false};
  std::thread alive([&] {  // node 1's supervisor looks at its round twice a second
    while (!stop) {
      node1.closed();
      std::this_thread::sleep_for(20ms);
    }
  });
  RestartRounds second = node(1);
  const std::string message = error_message([&] { second.join(never_cancelled); });
  EXPECT_TRUE(contains(message,
                       "[tandem-run] two launchers claim --node-rank 1: launcher 2 "
                       "(running) and launcher 3 (this one, refused)"))
      << message;
  EXPECT_FALSE(node0.closed());  // the job goes on, and node 0 still hears the first launcher
  auto finished0 = std::async(std::launch::async, [&] { return node0.finish(); });
  std::this_thread::sleep_for(400ms);
  stop = true;
  alive.join();
  EXPECT_EQ(node1.finish(), std::nullopt);
  EXPECT_EQ(finished0.get(), std::nullopt);
}

// Note [Node claims]: node 1's launcher dies while its workers run; node 0's workers finish, and
// node 0 says so within lost_after instead of waiting out --rdzv-timeout in silence.
TEST_F(RestartRoundsTest, NodeZeroNamesAPeerLauncherLostBeforeItFinished) {
  RestartRounds node0 = node(0), node1 = node(1);
  join_both(node0, node1);
  const auto started = std::chrono::steady_clock::now();
  const std::optional<std::string> lost = node0.finish();  // node 1 never beats again
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  ASSERT_TRUE(lost.has_value());
  EXPECT_TRUE(contains(*lost,
                       "[tandem-run] node 1's launcher was lost during attempt 0 (not "
                       "heard from for 200 ms)"))
      << *lost;
}

// Note [Node claims]: node 2's launcher died after round 0, and round 1 is sealed without it: its
// claim is marked lost, so a launcher started again for node 2 takes over at once (it closes the
// running round) instead of watching the dead one's beat for lost_after (60 s here).
TEST_F(RestartRoundsTest, ANodeDroppedFromARoundIsTakenOverAtOnceWhenStartedAgain) {
  const auto elastic = [&](int id) {
    return RestartRounds(client(), {.nnodes = 3,
                                    .min_nodes = 2,
                                    .node_rank = id,
                                    .last_call = 50ms,
                                    .rdzv_timeout = 20s,
                                    .poll_interval = 5ms,
                                    .lost_after = 60s});
  };
  // What round 0 left in the store: it ran on nodes 0, 1 and 2, node 2's launcher held claim 1
  // on its id and then died, and round 0 was closed. (Written by hand: three launchers forming
  // round 0 by themselves may seal it with two under load, the last call being 50 ms.)
  auto store = client();
  store->set("tandem-run/round/0/members", to_bytes("3;0,1,2"));
  ASSERT_EQ(store->add("tandem-run/node/2/claims", 1), 1);
  store->set("tandem-run/node/2/claim/1", to_bytes("launcher 0"));
  store->add("tandem-run/node/2/beat/1", 40);
  store->set("tandem-run/node/2/holder", to_bytes("1"));
  ASSERT_EQ(store->add("tandem-run/round", 1), 1);

  RestartRounds node0 = elastic(0), node1 = elastic(1);
  auto first0 = join_async(node0);
  ASSERT_EQ(node1.join(never_cancelled), 1);
  ASSERT_EQ(first0.get(), 1);
  ASSERT_EQ(node0.members(), (std::vector<int>{0, 1}));
  EXPECT_TRUE(store->check({"tandem-run/node/2/lost/1"}));
  EXPECT_FALSE(store->check({"tandem-run/node/1/lost/1"}));  // still a member: not lost

  RestartRounds restarted2 = elastic(2);
  std::atomic<bool> stop{false};
  auto late =
      std::async(std::launch::async, [&] { return restarted2.join([&] { return stop.load(); }); });
  const auto started = std::chrono::steady_clock::now();
  while (!node0.closed() && std::chrono::steady_clock::now() - started < 30s)
    std::this_thread::sleep_for(5ms);
  stop = true;
  EXPECT_TRUE(node0.closed()) << "the restarted launcher watched the dead one's beat";
  EXPECT_EQ(to_string(store->get("tandem-run/node/2/holder")), "2");
  EXPECT_EQ(late.get(), std::nullopt);  // cancelled while it waits for the others in round 2
}

}  // namespace
}  // namespace tandem::parallel
