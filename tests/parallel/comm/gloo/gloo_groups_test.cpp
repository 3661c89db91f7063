// The Gloo group beyond single collectives: the argument checks of the new collectives on a group
// of one, and a receive of the wrong size (Note [Gloo message header]). The consistency check,
// sub-groups and point-to-point on several ranks run for every backend in collectives_test.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/tandem.h"
#include "parallel/comm/gloo/gloo_process_group.h"
#include "parallel/comm/init_process_group.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/store_server.h"
#include "tests/parallel/comm/gloo/gloo_solo_group.h"
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

using GlooOneRank = testing::GlooSoloGroup;

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
  expect_error([&] { group_.irecv(four, kAnySource); },
               "[gloo] irecv: a group of one rank has no one to receive from");
  expect_error([&] { group_.new_group({0, 0}); }, "[gloo] new_group: rank 0 is listed twice");
  expect_error([&] { group_.new_group({1}); }, "[gloo] new_group: rank 1 is out of range");
  // Nothing was queued: the group still works.
  group_.barrier()->wait();
}

// --- several processes

// The consistency check, sub-groups and tags on several ranks: collectives_test.cpp.

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
