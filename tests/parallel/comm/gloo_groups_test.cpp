// The Gloo group beyond single collectives: sub-groups (new_group), point-to-point with tags and
// from any source, the consistency check (Note [Collective consistency]) and the argument checks
// of the new collectives. Each multiprocess test is one spawned job.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/tandem.h"
#include "parallel/comm/gloo_process_group.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm/store_server.h"
#include "tests/support/error_message.h"
#include "tests/support/spawn_ranks.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using tandem::testing::contains;
using tandem::testing::error_message;

std::shared_ptr<ProcessGroup> join_group() {
  return init_process_group("gloo", from_environment(), {.timeout = 30s});
}

// --- arguments, on a group of one

class GlooOneRank : public ::testing::Test {
 protected:
  GlooOneRank()
      : store_(std::make_shared<TcpStore>(TcpStoreOptions{.port = server_.port(), .timeout = 10s})),
        group_(store_, 0, 1, {.timeout = 10s}) {}

  StoreServer server_;
  std::shared_ptr<TcpStore> store_;
  GlooProcessGroup group_;
};

TEST_F(GlooOneRank, EveryCollectiveOfOneRankKeepsOrMovesItsOwnData) {
  const Tensor data = from_vector<float>({1, 2, 3, 4}, {4});
  for (const ReduceOp op :
       {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max}) {
    Tensor t = data.clone();
    group_.reduce({t}, 0, op)->wait();
    EXPECT_EQ(t.to_vector<float>(), data.to_vector<float>()) << reduce_op_name(op);
    Tensor out = zeros({4});
    group_.reduce_scatter_tensor(out, data, op)->wait();
    EXPECT_EQ(out.to_vector<float>(), data.to_vector<float>()) << reduce_op_name(op);
  }
  std::vector<Tensor> gathered = {zeros({4})};
  group_.gather(gathered, data, 0)->wait();
  EXPECT_EQ(gathered[0].to_vector<float>(), data.to_vector<float>());
  Tensor scattered = zeros({4});
  group_.scatter(scattered, {data}, 0)->wait();
  EXPECT_EQ(scattered.to_vector<float>(), data.to_vector<float>());
  Tensor exchanged = zeros({2, 2});
  group_.alltoall_single(exchanged, data.view({2, 2}), {2}, {2})->wait();
  EXPECT_EQ(exchanged.to_vector<float>(), data.to_vector<float>());
  auto sub = group_.new_group({0});
  EXPECT_EQ(sub->rank(), 0);
  Tensor t = data.clone();
  sub->allreduce({t}, ReduceOp::Max)->wait();
  EXPECT_EQ(t.to_vector<float>(), data.to_vector<float>());
}

TEST_F(GlooOneRank, BadArgumentsThrowAtTheCallNamingTheOp) {
  const Tensor four = zeros({4});
  const auto expect_error = [&](const std::function<void()>& call, const std::string& text) {
    const std::string message = error_message(call);
    EXPECT_TRUE(contains(message, text)) << message;
  };
  expect_error([&] { group_.reduce({four}, 1, ReduceOp::Sum); },
               "[gloo] reduce: root 1 is out of range for 1 ranks");
  expect_error([&] { group_.reduce({zeros({2}, {.dtype = DType::Int64})}, 0, ReduceOp::Avg); },
               "[gloo] reduce: avg does not reduce int64 tensors (tensor 0)");
  expect_error(
      [&] {
        group_.gather({zeros({4}), zeros({4})}, four, 0);
      },
      "[gloo] gather: got 2 output tensors for 1 ranks");
  expect_error([&] { group_.gather({zeros({3})}, four, 0); },
               "[gloo] gather: output 0 is float32 [3] but the input is float32 [4]");
  expect_error([&] { group_.scatter(four, {}, 0); }, "[gloo] scatter: got 0 input tensors");
  expect_error([&] { group_.reduce_scatter_tensor(zeros({3}), four); },
               "[gloo] reduce_scatter_tensor: the input is float32 [4]; it must be 1 × the "
               "output's 3 elements of float32 (pad it to a multiple of the group's size)");
  expect_error([&] { group_.allgather_into_tensor(zeros({5}), four); },
               "[gloo] allgather_into_tensor: the output is float32 [5]; it must be 1 × the "
               "input's 4 elements of float32");
  expect_error([&] { group_.alltoall_single(zeros({4}), four, {3}, {4}); },
               "[gloo] alltoall_single: the output split sizes add up to 3 rows, but the "
               "output has 4");
  expect_error(
      [&] {
        group_.alltoall_single(zeros({4, 2}), four);
      },
      "differ in dtype or in the size of a row");
  expect_error([&] { group_.alltoall({zeros({2})}, {zeros({3})}); },
               "[gloo] alltoall: rank 0 sends itself 3 elements but expects 2 from itself");
  expect_error([&] { group_.alltoall({zeros({2})}, {zeros({2}, {.dtype = DType::Int64})}); },
               "[gloo] alltoall: every tensor must be int64 like input 0, but output 0 is float32");
  expect_error([&] { group_.isend(four, 0); }, "[gloo] isend: dst 0 is this rank");
  expect_error([&] { group_.irecv(four, 3); }, "[gloo] irecv: src 3 is out of range for 1 ranks");
  expect_error([&] { group_.new_group({0, 0}); }, "[gloo] new_group: rank 0 is listed twice");
  expect_error([&] { group_.new_group({1}); }, "[gloo] new_group: rank 1 is out of range");
  // Nothing was queued: the group still works.
  group_.barrier()->wait();
}

// --- several processes

// Note [Collective consistency]: a rank that passes another size, or calls another collective,
// fails that collective on every rank with the same line; nothing ran, so the group goes on.
TEST(GlooConsistencyMultiprocess, AMismatchFailsEveryRankWithOneLineAndTheGroupGoesOn) {
  TANDEM_RUN_AS_RANKS(3);
  auto group = join_group();
  const int rank = group->rank();
  Tensor t = full({rank == 1 ? 7 : 8}, 1.0);
  const std::string sizes = error_message([&] { group->allreduce({t}, ReduceOp::Sum)->wait(); });
  EXPECT_TRUE(contains(sizes, "[gloo] allreduce on rank " + std::to_string(rank) +
                                  " of 3: the ranks were not asked for the same collective, so "
                                  "none ran it: ranks 0 and 2: allreduce sum: 8 float32; rank 1: "
                                  "allreduce sum: 7 float32"))
      << sizes;
  EXPECT_EQ(t.data<float>()[0], 1.0f) << "nothing ran";
  const std::string calls = error_message([&] {
    Tensor u = full({4}, 1.0);
    (rank == 2 ? group->broadcast({u}, 0) : group->allreduce({u}, ReduceOp::Max))->wait();
  });
  EXPECT_TRUE(contains(calls,
                       "ranks 0 and 1: allreduce max: 4 float32; rank 2: broadcast at "
                       "root 0: 4 float32"))
      << calls;
  // Uneven alltoall sizes that do not pair up: rank 0 sends rank 1 two rows, rank 1 expects one.
  const std::vector<int64_t> in_splits = {1, rank == 0 ? 2 : 1, 1};
  Tensor out = zeros({3}), in = zeros({in_splits[0] + in_splits[1] + in_splits[2]});
  const std::string counts = error_message([&] {
    group->alltoall_single(out, in, {1, 1, 1}, in_splits)->wait();
  });
  EXPECT_TRUE(contains(counts, "rank 0 sends 2 elements to rank 1, which expects 1 from it"))
      << counts;
  Tensor fine = full({5}, rank);
  group->allreduce({fine}, ReduceOp::Sum)->wait();
  EXPECT_EQ(fine.data<float>()[4], 3.0f);
}

// new_group: members renumbered in order, their collectives and the world's interleaved in
// flight; the ranks outside get a group that refuses use in one line.
TEST(GlooSubgroupMultiprocess, SubgroupsRunBesideTheWorldAndRefuseNonMembers) {
  TANDEM_RUN_AS_RANKS(4);
  auto world = join_group();
  const int rank = world->rank();
  auto odd = new_group(*world, {3, 1});
  auto low = world->new_group({0, 1, 2});
  if (rank % 2 == 1) {
    EXPECT_EQ(odd->rank(), rank / 2);
    EXPECT_EQ(odd->size(), 2);
  } else {
    EXPECT_EQ(odd->rank(), -1);
    EXPECT_FALSE(odd->is_member());
    const std::string message = error_message([&] { odd->allreduce({zeros({1})}); });
    EXPECT_TRUE(contains(message,
                         "[gloo] allreduce: this rank is not a member of this group (ranks 1 and 3 "
                         "of the group it was made from); new_group() gives the ranks outside a "
                         "group that refuses every operation"))
        << message;
    EXPECT_TRUE(contains(error_message([&] { odd->new_group({0}); }), "not a member"));
  }
  for (int round = 0; round < 3; ++round) {
    Tensor in_world = full({100}, rank + round);
    Tensor in_odd = full({100}, rank * 10 + round);
    Tensor in_low = full({3}, rank);
    auto world_work = world->allreduce({in_world});
    auto odd_work = odd->is_member() ? odd->allreduce({in_odd}) : nullptr;
    auto low_work = low->is_member() ? low->allreduce({in_low}, ReduceOp::Max) : nullptr;
    world_work->wait();
    EXPECT_EQ(in_world.data<float>()[99], 6 + 4 * round);
    if (odd_work) {
      odd_work->wait();
      EXPECT_EQ(in_odd.data<float>()[0], 40 + 2 * round);
    }
    if (low_work) {
      low_work->wait();
      EXPECT_EQ(in_low.data<float>()[0], 2);
    }
  }
  // A sub-group of a sub-group, made by its members only.
  if (low->is_member()) {
    auto pair = low->new_group({1, 2});
    EXPECT_EQ(pair->rank(), rank == 0 ? -1 : rank - 1);
    if (pair->is_member()) {
      Tensor t = full({2}, rank);
      pair->broadcast({t}, 1)->wait();
      EXPECT_EQ(t.data<float>()[1], 2.0f);
    }
  }
  world->barrier()->wait();
}

// Note [Gloo point-to-point]: sends and receives match by (peer, tag), start beside pending
// collectives, and a receive from any rank says who sent.
TEST(GlooPointToPointMultiprocess, TagsAnySourceAndCollectivesInFlight) {
  TANDEM_RUN_AS_RANKS(3);
  auto group = join_group();
  const int rank = group->rank(), size = group->size();
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  // Two messages to the right, received in the other order by their tags; odd length and none.
  Tensor first = full({1001}, rank), second = full({3}, rank * 10, {.dtype = DType::Int64});
  Tensor none = zeros({0});
  auto sends = std::vector{group->isend(first, right, 1), group->isend(second, right, 2),
                           group->isend(none, right, 3)};
  Tensor got_second = zeros({3}, {.dtype = DType::Int64}), got_first = zeros({1001});
  Tensor got_none = zeros({0});
  EXPECT_EQ(group->recv(got_second, left, 2), left);
  EXPECT_EQ(group->recv(got_first, left, 1), left);
  group->recv(got_none, left, 3);
  for (auto& send : sends) send->wait();
  EXPECT_EQ(got_first.data<float>()[1000], static_cast<float>(left));
  EXPECT_EQ(got_second.to_vector<int64_t>(), std::vector<int64_t>(3, left * 10));
  // Rank 0 receives from whoever sends first, twice; a barrier queued before does not hold the
  // messages back (point-to-point does not wait in the collectives' queue).
  if (rank == 0) {
    std::vector<int> sources;
    for (int k = 0; k < size - 1; ++k) {
      Tensor t = zeros({2});
      const int source = group->recv(t, kAnySource, 7);
      EXPECT_EQ(t.data<float>()[0], static_cast<float>(source * 5));
      sources.push_back(source);
    }
    std::sort(sources.begin(), sources.end());
    EXPECT_EQ(sources, (std::vector<int>{1, 2}));
    group->barrier()->wait();
  } else {
    auto barrier = group->barrier();  // cannot finish before rank 0 has received
    group->send(full({2}, rank * 5), 0, 7);
    barrier->wait();
  }
}

// Note [Gloo message header]: a receive of another size or dtype than was sent fails with one
// line (Gloo alone would abort the receiving process, or fill the tensor partly); the group goes
// on. A receive still pending when the group is destroyed fails at once.
TEST(GlooPointToPointMultiprocess, AWrongSizeFailsTheReceiveOnly) {
  TANDEM_RUN_AS_RANKS(2);
  auto group = join_group();
  if (group->rank() == 0) {
    group->send(full({5}, 1.0), 1, 4);
    group->send(full({3}, 1.0), 1, 4);
    group->send(full({4}, 1.0), 1, 4);
    group->send(full({4}, 2.0), 1, 4);
  } else {
    for (const char* expected :
         {"rank 0 sent 5 float32 elements, but this receive expects 4 float32",
          "rank 0 sent 3 float32 elements, but this receive expects 4 float32",
          "rank 0 sent 4 float32 elements, but this receive expects 4 int64"}) {
      Tensor t = zeros({4}, {.dtype = contains(expected, "int64") ? DType::Int64 : DType::Float32});
      const std::string message = error_message([&] { group->recv(t, 0, 4); });
      EXPECT_TRUE(contains(message, "[gloo] irecv #")) << message;
      EXPECT_TRUE(contains(message, " on rank 1 of 2 (from rank 0, tag 4) failed: ")) << message;
      EXPECT_TRUE(contains(message, std::string(expected) + "; the message was dropped"))
          << message;
    }
    Tensor t = zeros({4});
    group->recv(t, 0, 4);
    EXPECT_EQ(t.to_vector<float>(), std::vector<float>(4, 2.0f));
  }
  group->barrier()->wait();
  if (group->rank() == 0) {
    auto never = group->irecv(zeros({1}), 1, 99);  // rank 1 sends nothing with tag 99
    const auto start = std::chrono::steady_clock::now();
    group.reset();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
    const std::string message = error_message([&] { never->wait(); });
    EXPECT_TRUE(contains(message, "did not complete: the group was destroyed first")) << message;
  }
}

}  // namespace
}  // namespace tandem::parallel
