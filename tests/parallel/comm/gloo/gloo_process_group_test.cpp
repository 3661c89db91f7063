#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

#include "engine/tandem.h"
#include "engine/tensor_impl.h"
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
using tandem::testing::SpawnOptions;

// rank r holds r * 1000 + i at index i: sums and averages over the ranks are exact in float.
Tensor ramp(int rank, int64_t n) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[static_cast<size_t>(i)] = static_cast<float>(rank * 1000 + i);
  return from_vector<float>(values, {n});
}

// --- one process

using GlooSingleRank = testing::GlooSoloGroup;

TEST_F(GlooSingleRank, CollectivesOfOneRankKeepTheData) {
  EXPECT_EQ(group_.backend_name(), "gloo");
  EXPECT_EQ(group_.rank(), 0);
  EXPECT_EQ(group_.size(), 1);
  Tensor t = ramp(0, 5);
  group_.allreduce({t}, ReduceOp::Avg)->wait();
  EXPECT_EQ(t.to_vector<float>(), ramp(0, 5).to_vector<float>());
  std::vector<Tensor> outputs = {zeros({5})};
  group_.allgather(outputs, t)->wait();
  EXPECT_EQ(outputs[0].to_vector<float>(), t.to_vector<float>());
  group_.broadcast({t}, 0)->wait();
  group_.barrier()->wait();
}

TEST_F(GlooSingleRank, BadArgumentsThrowAtTheCall) {
  Tensor t = zeros({2, 3});
  Tensor strided(
      std::make_shared<TensorImpl>(t.storage(), Shape{3, 2}, Shape{1, 3}, 0, DType::Float32));
  EXPECT_TRUE(contains(error_message([&] { group_.allreduce({strided}, ReduceOp::Sum); }),
                       "[gloo] allreduce: tensor 0 is not dense"));
  const Tensor bytes = zeros({4}, {.dtype = DType::UInt8});
  EXPECT_TRUE(contains(error_message([&] {
                         group_.allreduce({t, bytes}, ReduceOp::Sum);
                       }),
                       "[gloo] allreduce: tensor 1 is uint8; supported: float32, bfloat16, "
                       "float16, int64"));
  std::vector<Tensor> byte_outputs = {zeros({4}, {.dtype = DType::UInt8})};
  EXPECT_TRUE(contains(error_message([&] { group_.broadcast({bytes}, 0); }),
                       "[gloo] broadcast: tensor 0 is uint8"));
  EXPECT_TRUE(contains(error_message([&] { group_.allgather(byte_outputs, bytes); }),
                       "[gloo] allgather: tensor 0 is uint8"));
  const Tensor labels = zeros({4}, {.dtype = DType::Int64});
  const std::string int64_avg = error_message([&] { group_.allreduce({labels}, ReduceOp::Avg); });
  EXPECT_TRUE(contains(int64_avg,
                       "[gloo] allreduce: avg does not reduce int64 tensors (tensor 0); avg takes "
                       "float32, bfloat16, float16"))
      << int64_avg;
  EXPECT_FALSE(contains(int64_avg, "float16, int64")) << int64_avg;
  EXPECT_TRUE(contains(error_message([&] { group_.broadcast({t}, 1); }),
                       "[gloo] broadcast: root 1 is out of range for 1 ranks"));
  std::vector<Tensor> two = {zeros({2, 3}), zeros({2, 3})};
  EXPECT_TRUE(contains(error_message([&] { group_.allgather(two, t); }),
                       "[gloo] allgather: got 2 output tensors for 1 ranks"));
  std::vector<Tensor> wrong_shape = {zeros({3})};
  EXPECT_TRUE(
      contains(error_message([&] { group_.allgather(wrong_shape, t); }),
               "[gloo] allgather: output 0 is float32 [3] but the input is float32 [2, 3]"));
  // A tensor on a CUDA device (its storage is host memory here; only the device tag matters).
  auto storage = std::make_shared<Storage>(16, Device::cuda(0),
                                           runtime_for(Device::cpu()).allocator(Device::cpu()));
  Tensor on_gpu(std::make_shared<TensorImpl>(storage, Shape{4}, Shape{1}, 0, DType::Float32));
  EXPECT_TRUE(contains(error_message([&] { group_.allreduce({on_gpu}, ReduceOp::Sum); }),
                       "staging CUDA tensors through pinned memory is not written yet"));
  // The rejected calls queued nothing: the group still works.
  group_.allreduce({t}, ReduceOp::Sum)->wait();
}

TEST(Gloo, RendezvousWithoutPeersTimesOutClearly) {
  StoreServer server;
  auto store = std::make_shared<TcpStore>(TcpStoreOptions{.port = server.port(), .timeout = 10s});
  const std::string message =
      error_message([&] { GlooProcessGroup group(store, 0, 2, {.timeout = 300ms}); });
  EXPECT_TRUE(contains(message, "[gloo] rendezvous failed on rank 0 of 2")) << message;
  EXPECT_TRUE(contains(message, "timed out after 300 ms")) << message;
}

TEST(Gloo, AnInterfaceThatIsNotThereIsNamedWithTheOnesThatAre) {
  StoreServer server;
  auto store = std::make_shared<TcpStore>(TcpStoreOptions{.port = server.port(), .timeout = 10s});
  const std::string message = error_message(
      [&] { GlooProcessGroup group(store, 0, 1, {.timeout = 10s, .interface = "nosuch0"}); });
  EXPECT_TRUE(contains(message, "[gloo] no network interface 'nosuch0'")) << message;
  EXPECT_TRUE(contains(message, "lo")) << message;  // every machine has loopback
  GlooProcessGroup group(store, 0, 1, {.timeout = 10s, .interface = "lo"});
}

TEST(Gloo, InitProcessGroupNamesUnsupportedBackends) {
  const DistributedEnv env;
  if (!cuda_available()) {
    // Before any store is touched: no port is opened, no peer awaited.
    EXPECT_TRUE(contains(error_message([&] { init_process_group("nccl", env); }), "[nccl] "));
  }
  EXPECT_TRUE(contains(error_message([&] { init_process_group("ucc", env); }),
                       "[process_group] unknown backend 'ucc'"));
}

// tandem-run's store outlives an attempt: a restarted attempt's ranks must not meet the keys the
// last one left there, so each attempt's keys carry its number.
TEST(Gloo, InitProcessGroupScopesKeysByAttemptInALauncherHostedStore) {
  StoreServer server;
  DistributedEnv env;
  env.master_port = server.port();
  env.store_host = StoreHost::TandemRun;
  env.restart_count = 2;
  auto group = init_process_group("gloo", env, {.timeout = 10s});
  TcpStore store(TcpStoreOptions{.port = server.port(), .timeout = 10s});
  EXPECT_TRUE(store.check({"/worker/attempt_2/tandem/world_size/rank0"}));
  EXPECT_FALSE(store.check({"tandem/world_size/rank0"}));
}

TEST(Gloo, WorkWaitTimesOutNamingTheCollective) {
  Work work("[gloo] allreduce #7 on rank 1 of 2", 10s);
  EXPECT_FALSE(work.completed());
  EXPECT_EQ(work.started_at(), Work::Clock::time_point{});
  const std::string message = error_message([&] { work.wait(50ms); });
  EXPECT_TRUE(contains(message, "[gloo] allreduce #7 on rank 1 of 2 did not complete within 50 ms"))
      << message;
  work.mark_started();
  work.mark_completed(std::make_exception_ptr(Error("[gloo] allreduce failed: boom")));
  EXPECT_TRUE(work.completed());
  EXPECT_TRUE(work.failed());
  EXPECT_LE(work.started_at(), work.ended_at());
  EXPECT_TRUE(contains(error_message([&] { work.wait(); }), "boom"));
}

// --- several ranks, each on a thread of this process (the groups meet on one in-process store)

// Runs body(group) on every rank of a `size`-rank group, one thread per rank; rethrows the first
// rank's error once all have finished (a rank that failed early leaves the others to time out).
void run_ranks_in_threads(int size, const std::function<void(GlooProcessGroup&)>& body) {
  StoreServer server;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        auto store =
            std::make_shared<TcpStore>(TcpStoreOptions{.port = server.port(), .timeout = 20s});
        GlooProcessGroup group(store, rank, size, {.timeout = 20s});
        body(group);
      } catch (...) {
        errors[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (std::thread& rank : ranks) rank.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

std::vector<uint16_t> bits_of(const Tensor& half) {
  std::vector<uint16_t> bits(static_cast<size_t>(half.numel()));
  if (!bits.empty()) std::memcpy(bits.data(), half.data_ptr(), half.nbytes());
  return bits;
}

// Rank r's float32 values, with 8 fraction bits spread over magnitudes 0.25..100: neither type
// holds them exactly, so the inputs are rounded, and no sum or half of one is a subnormal.
Tensor varied(int rank, int64_t n) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double wave = std::sin(0.37 * static_cast<double>(i) + rank);
    values[static_cast<size_t>(i)] =
        static_cast<float>((wave >= 0 ? 1 : -1) * (0.25 + 100 * wave * wave));
  }
  return from_vector(values, {n});
}

// Rank r's multiples of 1/4 in [-5, 5]: every partial sum of up to 3 ranks is exact in both types,
// so the result cannot depend on the order in which Gloo adds.
Tensor quarters(int rank, int64_t n) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    values[static_cast<size_t>(i)] = static_cast<float>((i * 7 + rank * 3) % 41 - 20) * 0.25f;
  }
  return from_vector(values, {n});
}

// Allreduces `input` (float32) as `half` and as float32 in the same group: the 16-bit result must
// be the float32 one rounded, bit for bit. n = 1001 splits unevenly over the ranks' chunks.
void expect_half_allreduce_is_float_rounded(GlooProcessGroup& group, const Tensor& input,
                                            DType half, ReduceOp op) {
  const Tensor rounded = input.to(half);  // the 16-bit values this rank contributes
  Tensor reduced = rounded.clone();
  Tensor reference = rounded.to(DType::Float32);
  group.allreduce({reduced}, op)->wait();
  group.allreduce({reference}, op)->wait();
  ASSERT_EQ(reduced.dtype(), half);
  EXPECT_EQ(bits_of(reduced), bits_of(reference.to(half)))
      << dtype_name(half) << (op == ReduceOp::Avg ? " avg" : " sum") << " on rank " << group.rank();
}

TEST(GlooThreads, HalfAllreduceOfTwoRanksIsTheFloatResultRounded) {
  run_ranks_in_threads(2, [](GlooProcessGroup& group) {
    for (DType half : {DType::BFloat16, DType::Float16}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
        expect_half_allreduce_is_float_rounded(group, varied(group.rank(), 1001), half, op);
      }
    }
  });
}

TEST(GlooThreads, HalfAllreduceOfThreeRanksIsTheFloatResultRounded) {
  run_ranks_in_threads(3, [](GlooProcessGroup& group) {
    for (DType half : {DType::BFloat16, DType::Float16}) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg}) {
        expect_half_allreduce_is_float_rounded(group, quarters(group.rank(), 1001), half, op);
      }
    }
    // Several tensors of both types and an empty one in one call, each reduced on its own.
    Tensor b = full({5}, 1.5 + group.rank(), {.dtype = DType::BFloat16});
    Tensor h = full({3}, 0.25, {.dtype = DType::Float16});
    Tensor none = zeros({0}, {.dtype = DType::Float16});
    group.allreduce({b, none, h}, ReduceOp::Sum)->wait();
    EXPECT_EQ(b.to(DType::Float32).to_vector<float>(), std::vector<float>(5, 7.5f));
    EXPECT_EQ(h.to(DType::Float32).to_vector<float>(), std::vector<float>(3, 0.75f));
  });
}

TEST(GlooThreads, HalfBroadcastAndAllgatherKeepEveryBit) {
  run_ranks_in_threads(3, [](GlooProcessGroup& group) {
    const int rank = group.rank();
    for (DType half : {DType::BFloat16, DType::Float16}) {
      const int root = 2;
      Tensor mine = varied(rank, 37).to(half);
      group.broadcast({mine}, root)->wait();
      EXPECT_EQ(bits_of(mine), bits_of(varied(root, 37).to(half))) << dtype_name(half);

      const Tensor input = varied(rank, 10).view({2, 5}).to(half);
      std::vector<Tensor> outputs;
      for (int r = 0; r < group.size(); ++r) outputs.push_back(zeros({2, 5}, {.dtype = half}));
      group.allgather(outputs, input)->wait();
      for (int r = 0; r < group.size(); ++r) {
        EXPECT_EQ(bits_of(outputs[r]), bits_of(varied(r, 10).to(half)))
            << dtype_name(half) << " from rank " << r;
      }
    }
  });
}

// --- several processes (TANDEM_RUN_AS_RANKS runs the body in every rank)

std::shared_ptr<ProcessGroup> join_group(std::chrono::milliseconds timeout = 20s) {
  return init_process_group("gloo", from_environment(), {.timeout = timeout});
}

void check_allreduce(ProcessGroup& group) {
  const int n = group.size();
  Tensor sum = ramp(group.rank(), 1000), avg = ramp(group.rank(), 1000);
  Tensor small = ramp(group.rank(), 3), empty = zeros({0});
  Tensor counts = from_vector<int64_t>({group.rank(), 1}, {2}, {.dtype = DType::Int64});
  auto first = group.allreduce({sum, small, empty}, ReduceOp::Sum);
  auto second = group.allreduce({avg}, ReduceOp::Avg);
  auto third = group.allreduce({counts}, ReduceOp::Sum);
  first->wait();
  second->wait();
  third->wait();
  const float rank_sum = 1000.0f * n * (n - 1) / 2;  // sum over r of r * 1000
  for (int64_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(sum.data<float>()[i], rank_sum + n * i) << i;
    ASSERT_EQ(avg.data<float>()[i], rank_sum / n + i) << i;
  }
  EXPECT_EQ(small.to_vector<float>(),
            (std::vector<float>{rank_sum, rank_sum + n, rank_sum + 2 * n}));
  EXPECT_EQ(counts.to_vector<int64_t>(), (std::vector<int64_t>{n * (n - 1) / 2, n}));
}

TEST(GlooMultiprocess, AllreduceSumAndAvgTwoRanks) {
  TANDEM_RUN_AS_RANKS(2);
  auto group = join_group();
  ASSERT_EQ(group->size(), 2);
  check_allreduce(*group);
}

TEST(GlooMultiprocess, AllreduceSumAndAvgFourRanks) {
  TANDEM_RUN_AS_RANKS(4);
  auto group = join_group();
  ASSERT_EQ(group->size(), 4);
  check_allreduce(*group);
}

TEST(GlooMultiprocess, BroadcastFromEachRoot) {
  TANDEM_RUN_AS_RANKS(4);
  auto group = join_group();
  for (int root = 0; root < group->size(); ++root) {
    Tensor values = ramp(group->rank(), 100);
    Tensor ids = full({3}, group->rank(), {.dtype = DType::Int64});
    group->broadcast({values, ids}, root)->wait();
    EXPECT_EQ(values.to_vector<float>(), ramp(root, 100).to_vector<float>()) << root;
    EXPECT_EQ(ids.to_vector<int64_t>(), std::vector<int64_t>(3, root)) << root;
  }
}

TEST(GlooMultiprocess, BroadcastCoalescedRestoresEveryTensorOfEveryDtype) {
  TANDEM_RUN_AS_RANKS(3);
  auto group = join_group();
  const int root = 1;
  // Mixed dtypes and shapes, a scalar and an empty tensor, interleaved: each must get back
  // exactly its own part of the flattened buffers.
  const auto make = [](int rank) {
    return std::vector<Tensor>{ramp(rank, 7).view({7}),
                               full({}, 10 + rank, {.dtype = DType::Int64}),
                               ramp(rank + 50, 12).view({3, 4}), zeros({0}),
                               full({2, 2}, 20 + rank, {.dtype = DType::Int64})};
  };
  std::vector<Tensor> mine = make(group->rank());
  broadcast_coalesced(*group, mine, root);
  const std::vector<Tensor> expected = make(root);
  for (size_t i = 0; i < mine.size(); ++i) {
    ASSERT_EQ(mine[i].shape(), expected[i].shape()) << i;
    if (mine[i].dtype() == DType::Int64) {
      EXPECT_EQ(mine[i].to_vector<int64_t>(), expected[i].to_vector<int64_t>()) << i;
    } else {
      EXPECT_EQ(mine[i].to_vector<float>(), expected[i].to_vector<float>()) << i;
    }
  }
}

TEST(GlooMultiprocess, AllgatherCollectsEveryRanksInput) {
  TANDEM_RUN_AS_RANKS(4);
  auto group = join_group();
  const Tensor input = ramp(group->rank(), 10).view({2, 5});
  std::vector<Tensor> outputs;
  for (int r = 0; r < group->size(); ++r) outputs.push_back(zeros({2, 5}));
  group->allgather(outputs, input)->wait();
  for (int r = 0; r < group->size(); ++r) {
    EXPECT_EQ(outputs[r].to_vector<float>(), ramp(r, 10).to_vector<float>()) << r;
  }
  const Tensor id = full({1}, 10 + group->rank(), {.dtype = DType::Int64});
  std::vector<Tensor> ids;
  for (int r = 0; r < group->size(); ++r) ids.push_back(zeros({1}, {.dtype = DType::Int64}));
  group->allgather(ids, id)->wait();
  for (int r = 0; r < group->size(); ++r) EXPECT_EQ(ids[r].item(), 10 + r);
}

TEST(GlooMultiprocess, BarrierWaitsForEveryRank) {
  TANDEM_RUN_AS_RANKS(3);
  const DistributedEnv env = from_environment();
  auto group = join_group();
  TcpStore store({.host = env.master_addr, .port = env.master_port, .timeout = 20s});
  // Later ranks arrive later; whoever leaves the barrier must find every rank's mark.
  std::this_thread::sleep_for(env.rank * 150ms);
  store.set("before_barrier/" + std::to_string(env.rank), {});
  group->barrier()->wait();
  EXPECT_TRUE(store.check({"before_barrier/0", "before_barrier/1", "before_barrier/2"}));
}

TEST(GlooMultiprocess, AsyncCollectivesRunInSubmissionOrder) {
  TANDEM_RUN_AS_RANKS(2);
  const DistributedEnv env = from_environment();
  auto group = join_group();
  TcpStore store({.host = env.master_addr, .port = env.master_port, .timeout = 20s});
  // allreduce() returns before the collective ran: rank 0's cannot finish before rank 1 joins,
  // and rank 1 joins only when rank 0 says it has checked.
  if (env.rank == 1) store.get("rank0_submitted");
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Work>> works;
  for (int k = 0; k < 8; ++k) {
    tensors.push_back(full({1000}, k + env.rank));
    works.push_back(group->allreduce({tensors.back()}, ReduceOp::Sum));
  }
  if (env.rank == 0) {
    EXPECT_FALSE(works.front()->completed());
    store.set("rank0_submitted", {});
  }
  works.back()->wait();
  for (int k = 0; k < 8; ++k) {
    EXPECT_TRUE(works[k]->completed()) << k;  // the last one done means all earlier ones are
    EXPECT_EQ(tensors[k].data<float>()[999], 2 * k + 1) << k;
    EXPECT_LE(works[k]->started_at(), works[k]->ended_at());
    if (k > 0) {
      EXPECT_LE(works[k - 1]->ended_at(), works[k]->started_at()) << k;
    }
  }
}

TEST(GlooMultiprocess, GroupsOnOneStoreDoNotMix) {
  TANDEM_RUN_AS_RANKS(2);
  for (int generation = 0; generation < 3; ++generation) {
    auto group = join_group();
    Tensor t = full({4}, generation + group->rank());
    group->allreduce({t}, ReduceOp::Sum)->wait();
    EXPECT_EQ(t.data<float>()[0], 2 * generation + 1);
  }
}

TEST(GlooMultiprocess, RankZeroHostsTheStoreWithoutTheLauncher) {
  TANDEM_RUN_AS_RANKS(2, SpawnOptions{.launcher_hosts_store = false});
  ASSERT_EQ(from_environment().store_host, StoreHost::Rank0);
  auto group = join_group();
  check_allreduce(*group);
}

// Rank 1 dies (SIGKILL, no cleanup) after the group is up; rank 0's next
// all-reduce must fail with a clear error within the group's timeout instead of hanging, and
// the broken group must refuse later collectives at once.
TEST(GlooMultiprocess, KilledRankMakesTheOthersFail) {
  if (!tandem::testing::launched_as_rank()) {
    const auto result = tandem::testing::spawn_ranks(
        2, tandem::testing::current_test_filter(),
        SpawnOptions{.timeout = std::chrono::seconds(60), .stop_on_failure = false});
    EXPECT_FALSE(result.timed_out);
    EXPECT_EQ(result.signals.at(1), SIGKILL);
    EXPECT_EQ(result.exit_codes.at(0), 0) << result.output;
    EXPECT_TRUE(contains(result.output_of(0), "[       OK ]")) << result.output;
    return;
  }
  auto group = join_group(5s);
  group->barrier()->wait();
  if (group->rank() == 1) std::raise(SIGKILL);
  Tensor t = full({1 << 16}, 1.0);
  auto work = group->allreduce({t}, ReduceOp::Sum);
  const std::string message = error_message([&] { work->wait(60s); });
  std::printf("rank 0 saw: %s\n", message.c_str());
  EXPECT_TRUE(contains(message, "[gloo] allreduce failed on rank 0 of 2: ")) << message;
  EXPECT_TRUE(work->failed());
  const std::string later = error_message([&] { group->barrier()->wait(60s); });
  EXPECT_TRUE(contains(later, "[gloo] barrier not run on rank 0 of 2: the group is broken"))
      << later;
}

// A peer that is alive but never joins the collective: the group's timeout ends the wait.
TEST(GlooMultiprocess, SilentRankMakesTheOthersTimeOut) {
  TANDEM_RUN_AS_RANKS(2);
  const DistributedEnv env = from_environment();
  auto group = join_group(2s);
  TcpStore store({.host = env.master_addr, .port = env.master_port, .timeout = 60s});
  if (env.rank == 1) {
    store.get("rank0_done");  // stays away from the collective until rank 0 has given up
    return;
  }
  Tensor t = full({16}, 1.0);
  auto work = group->allreduce({t}, ReduceOp::Sum);
  const std::string early = error_message([&] { work->wait(100ms); });
  EXPECT_TRUE(contains(early, "[gloo] allreduce #1 on rank 0 of 2 did not complete within 100 ms"))
      << early;
  const std::string message = error_message([&] { work->wait(60s); });
  EXPECT_TRUE(contains(message, "[gloo] allreduce failed on rank 0 of 2: ")) << message;
  std::printf("rank 0 saw: %s\n", message.c_str());
  EXPECT_TRUE(contains(message, "imed out")) << message;
  store.set("rank0_done", {});
}

}  // namespace
}  // namespace tandem::parallel
