// The NCCL process group's state machine on CPUs: the real nccl_process_group.cpp and
// nccl_device.cpp, on a scripted fake NCCL (fake_nccl.h) and the fake CUDA runtime
// (tests/support/fake_cuda), so no libnccl, libcudart or GPU. A collective's Work completes when
// the test runs the fake device's streams (fake_cuda::run_all); NCCL's non-blocking calls answer
// ncclInProgress as scripted; a peer's failure is FakeNccl::fail_async. Also run under
// ThreadSanitizer (scripts/test.sh --sanitize thread), which reports lock-order inversions
// between the group's mutexes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "parallel/comm/nccl/nccl_process_group.h"
#include "parallel/comm/rendezvous/store.h"
#include "tests/engine/cuda/runtime/fake_cuda_fixture.h"
#include "tests/parallel/comm/nccl/fake_nccl/fake_nccl.h"
#include "tests/support/error_message.h"
#include "tests/support/fake_cuda/fake_cuda_runtime.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using tandem::testing::contains;
using tandem::testing::error_message;
using testing::FakeNccl;

// Bounds the waits of tests whose Work must end on its own: a Work the group failed to end
// gives "did not complete within 30 s", which the test's message check then rejects.
constexpr auto kBound = 30s;

// A fresh fake CUDA runtime of two devices per test, checked for broken CUDA rules and leftover
// errors at the end (FakeCudaTest), and NCCL's rules checked the same way.
class NcclStateMachine : public fake_cuda::FakeCudaTest {
 protected:
  void TearDown() override {
    FakeCudaTest::TearDown();
    EXPECT_EQ(nccl.misuse(), std::vector<std::string>{});
  }

  // Rank 0 of 2 on cuda:1, its thread bound as init_process_group() binds it. Rank 0 makes the
  // NCCL id, so nobody else needs to join the fake.
  std::unique_ptr<NcclProcessGroup> make_group(std::chrono::milliseconds timeout = 600s,
                                               std::chrono::milliseconds init_timeout = 0ms) {
    bind_nccl_device(/*rank=*/0, /*local_rank=*/1, /*local_world_size=*/2);
    return std::make_unique<NcclProcessGroup>(
        store, 0, 2, /*device=*/1,
        ProcessGroupOptions{.timeout = timeout, .init_timeout = init_timeout}, nccl);
  }

  FakeNccl nccl;
  std::shared_ptr<Store> store =
      std::make_shared<TcpStore>(TcpStoreOptions{.port = 0, .is_server = true, .timeout = 10s});
};

std::string failure_of(Work& work) {
  return error_message([&] { work.synchronize(kBound); });
}

// --- creating the communicator

TEST_F(NcclStateMachine, InitIsPolledUntilNcclFinishes) {
  nccl.script(FakeNccl::Call::Init, {.in_progress_polls = 3, .result = ncclSuccess});
  auto group = make_group();
  EXPECT_GE(nccl.polls(), 4);  // three answers "in progress", then the result
  group.reset();
  EXPECT_EQ(nccl.calls(), (std::vector<std::string>{"get_unique_id", "comm_init_rank_config",
                                                    "comm_finalize", "comm_destroy"}));
}

TEST_F(NcclStateMachine, InitThatNeverFinishesTimesOutAndAborts) {
  nccl.script(FakeNccl::Call::Init, {.in_progress_polls = FakeNccl::kNever});
  const std::string message = error_message([&] { make_group(50ms); });
  EXPECT_TRUE(contains(message,
                       "[nccl] creating the communicator failed on rank 0 of 2 (cuda:1): NCCL did "
                       "not finish within 50 ms (a peer may have died or hung, or not every rank "
                       "joined)"))
      << message;
  EXPECT_EQ(nccl.count("comm_abort"), 1);
  EXPECT_EQ(nccl.count("comm_destroy"), 0);
}

TEST_F(NcclStateMachine, InitErrorQuotesNccl) {
  nccl.script(FakeNccl::Call::Init, {.in_progress_polls = 2, .result = ncclSystemError});
  const std::string message = error_message([&] { make_group(); });
  EXPECT_TRUE(
      contains(message,
               "[nccl] creating the communicator failed on rank 0 of 2 (cuda:1): NCCL error "
               "2: unhandled system error"))
      << message;
  EXPECT_EQ(nccl.count("comm_abort"), 1);
}

// Review H1: set-up (creating the communicator, and the connections NCCL makes inside the first
// ncclGroupEnd) is bounded by init_timeout, not by the collectives' timeout, and the watchdog's
// timeout counts from when the Work was queued: a start slower than a 200 ms timeout succeeds,
// and so does its first collective, run 20 ms after it was queued.
TEST_F(NcclStateMachine, ASlowSetUpIsBoundedByTheInitTimeoutNotTheCollectives) {
  nccl.on_poll([] { std::this_thread::sleep_for(40ms); });  // 8 polls in progress: 320 ms
  nccl.script(FakeNccl::Call::Init, {.in_progress_polls = 8});
  nccl.script(FakeNccl::Call::GroupEnd, {.in_progress_polls = 8});
  const auto start = std::chrono::steady_clock::now();
  auto group = make_group(/*timeout=*/200ms, /*init_timeout=*/30s);
  EXPECT_GT(std::chrono::steady_clock::now() - start, 200ms);
  auto work = group->allreduce({}, ReduceOp::Sum);
  EXPECT_GT(std::chrono::steady_clock::now() - start, 400ms);
  nccl.on_poll(nullptr);
  std::this_thread::sleep_for(20ms);  // the watchdog looks at the Work meanwhile
  fake_cuda::run_all();
  EXPECT_NO_THROW(work->synchronize(kBound));
  EXPECT_FALSE(work->failed());
  EXPECT_EQ(nccl.count("comm_abort"), 0);
  // Without init_timeout the same start fails at the collectives' timeout (zero: `timeout`).
  nccl.on_poll([] { std::this_thread::sleep_for(40ms); });
  nccl.script(FakeNccl::Call::Init, {.in_progress_polls = 8});
  const std::string message = error_message([&] { make_group(200ms); });
  EXPECT_TRUE(contains(message, "NCCL did not finish within 200 ms")) << message;
  nccl.on_poll(nullptr);
}

TEST_F(NcclStateMachine, OlderLibncclFailsBeforeTheRendezvous) {
  nccl.set_version(22105);
  const std::string message = error_message([&] { make_group(); });
  EXPECT_TRUE(contains(message, "[nccl] libnccl is 2.21.5, but Tandem was built with the NCCL "))
      << message;
  EXPECT_TRUE(nccl.calls().empty());
}

// --- collectives

TEST_F(NcclStateMachine, WorkCompletesWhenTheDeviceHasRunIt) {
  auto group = make_group();
  auto work = group->allreduce({}, ReduceOp::Sum);
  // Queued behind the caller's stream on the fake device, which has not run yet.
  EXPECT_FALSE(work->completed());
  fake_cuda::run_all();
  EXPECT_NO_THROW(work->synchronize(kBound));
  EXPECT_TRUE(work->completed());
  EXPECT_FALSE(work->failed());
  EXPECT_EQ(nccl.count("group_start"), 1);
  EXPECT_EQ(nccl.count("group_end"), 1);
}

TEST_F(NcclStateMachine, GroupEndInProgressIsPolledBeforeTheWorkIsHandedOut) {
  auto group = make_group();
  nccl.script(FakeNccl::Call::GroupEnd, {.in_progress_polls = 5, .result = ncclSuccess});
  const int polls_before = nccl.polls();
  auto work = group->broadcast({}, /*root=*/1);
  EXPECT_GE(nccl.polls() - polls_before, 6);
  fake_cuda::run_all();
  EXPECT_NO_THROW(work->synchronize(kBound));
}

// finish_call()'s deadline: the collective fails, the group aborts.
TEST_F(NcclStateMachine, GroupEndThatNeverFinishesFailsTheCollectiveAtTheDeadline) {
  auto group = make_group(50ms);
  nccl.script(FakeNccl::Call::GroupEnd, {.in_progress_polls = FakeNccl::kNever});
  auto work = group->allreduce({}, ReduceOp::Avg);
  EXPECT_TRUE(work->failed());
  const std::string message = failure_of(*work);
  EXPECT_TRUE(contains(message,
                       "[nccl] allreduce #1 on rank 0 of 2 failed: NCCL did not finish within 50 "
                       "ms (a peer may have died or hung, or not every rank joined); the "
                       "communicator was aborted"))
      << message;
  EXPECT_EQ(nccl.count("comm_abort"), 1);
}

TEST_F(NcclStateMachine, GroupEndErrorFailsTheCollective) {
  auto group = make_group();
  nccl.script(FakeNccl::Call::GroupEnd, {.result = ncclInvalidUsage});
  auto work = group->allreduce({}, ReduceOp::Sum);
  const std::string message = failure_of(*work);
  EXPECT_TRUE(
      contains(message, "[nccl] allreduce #1 on rank 0 of 2 failed: NCCL error 5: invalid usage"))
      << message;
}

// N4: synchronize() polls the end event itself. The watchdog is held in its first poll, before
// the device runs the collective, so only synchronize() can see it end.
TEST_F(NcclStateMachine, SynchronizeReturnsOnceTheDeviceRanTheWorkWithoutTheWatchdog) {
  auto group = make_group();
  std::promise<void> release;
  const std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> held{false};
  nccl.on_poll([&] {
    held = true;
    released.wait();
  });
  auto work = group->allreduce({}, ReduceOp::Sum);
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (!held && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(held);
  fake_cuda::run_all();
  const std::string message = error_message([&] { work->synchronize(2s); });
  release.set_value();
  EXPECT_EQ(message, "(no error)");
  EXPECT_TRUE(work->completed());
  group.reset();  // before the hook's state goes
}

// A collective that never ends still ends synchronize() at its own timeout.
TEST_F(NcclStateMachine, SynchronizeOfAWorkThatDoesNotEndTimesOut) {
  auto group = make_group();
  auto work = group->allreduce({}, ReduceOp::Sum);  // not run by the fake device yet
  const std::string message = error_message([&] { work->synchronize(50ms); });
  EXPECT_TRUE(contains(message,
                       "[nccl] allreduce #1 on rank 0 of 2 did not complete within 50 ms (a peer "
                       "may have died or hung, or the ranks issued different collectives)"))
      << message;
  EXPECT_FALSE(work->completed());
  fake_cuda::run_all();
  EXPECT_NO_THROW(work->synchronize(kBound));
}

// N10: a collective's start and end events come from the pool: no cudaEventCreate or
// cudaEventDestroy per collective once the first has given its events back.
TEST_F(NcclStateMachine, CollectivesReusePooledEvents) {
  auto group = make_group();
  auto run_one = [&] {
    std::weak_ptr<Work> done;
    {
      auto work = group->allreduce({}, ReduceOp::Sum);
      fake_cuda::run_all();
      work->synchronize(kBound);
      done = work;
    }
    // The watchdog lets go of the Work at its next pass; its events then go back to the pool.
    const auto deadline = std::chrono::steady_clock::now() + kBound;
    while (!done.expired() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(1ms);
    }
  };
  run_one();
  const size_t created = fake_cuda::calls_to("cudaEventCreateWithFlags").size();
  for (int i = 0; i < 10; ++i) run_one();
  EXPECT_EQ(fake_cuda::calls_to("cudaEventCreateWithFlags").size(), created);
  EXPECT_EQ(fake_cuda::calls_to("cudaEventDestroy").size(), 0u);
}

// --- failures found by the watchdog

TEST_F(NcclStateMachine, PeersAsyncErrorFailsThePendingWorkAtOnce) {
  auto group = make_group();  // a 600 s timeout: only the async error can end the Work in time
  auto work = group->allreduce({}, ReduceOp::Sum);
  nccl.fail_async(ncclRemoteError, "rank 1 exited");
  const std::string message = failure_of(*work);
  EXPECT_TRUE(contains(message,
                       "[nccl] allreduce #1 on rank 0 of 2 failed: NCCL error 6: remote process "
                       "exited or there was a network error (rank 1 exited); the communicator was "
                       "aborted"))
      << message;
  group.reset();  // the watchdog aborts the communicator right after it failed the Work
  EXPECT_EQ(nccl.count("comm_abort"), 1);
}

// The design note on comm_mutex: a collective whose launch waits for its peers holds the lock
// until its deadline, unless NCCL reports the failure; then it ends at once.
TEST_F(NcclStateMachine, PeersAsyncErrorEndsALaunchStillInProgress) {
  auto group = make_group(kBound);
  nccl.script(FakeNccl::Call::GroupEnd, {.in_progress_polls = FakeNccl::kNever});
  nccl.fail_async(ncclRemoteError, "rank 1 exited");
  auto work = group->allreduce({}, ReduceOp::Sum);
  const std::string message = failure_of(*work);
  EXPECT_TRUE(contains(message,
                       "[nccl] allreduce #1 on rank 0 of 2 failed: NCCL error 6: remote process "
                       "exited or there was a network error (rank 1 exited); the communicator was "
                       "aborted"))
      << message;
}

TEST_F(NcclStateMachine, WorkOlderThanTheTimeoutAbortsTheGroup) {
  auto group = make_group(50ms);
  auto work = group->allreduce({}, ReduceOp::Sum);  // never run by the fake device
  const std::string message = failure_of(*work);
  EXPECT_TRUE(contains(message,
                       "[nccl] allreduce #1 on rank 0 of 2 did not complete within 50 ms (a peer "
                       "may have died or hung, or the ranks issued different collectives); the "
                       "communicator was aborted"))
      << message;
}

// Note [NCCL watchdog]: the Works fail before ncclCommAbort, which would let their end events
// complete and make them look successful.
TEST_F(NcclStateMachine, AbortFailsEveryPendingWorkBeforeAbortingTheCommunicator) {
  auto group = make_group();
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < 3; ++i) works.push_back(group->allreduce({}, ReduceOp::Sum));
  std::vector<bool> failed_at_abort;
  nccl.on_abort([&] {
    for (const auto& work : works) failed_at_abort.push_back(work->failed());
  });
  nccl.fail_async(ncclRemoteError, "");
  const std::string last = failure_of(*works.back());
  group.reset();  // the watchdog aborts the communicator right after it failed the Works
  EXPECT_EQ(failed_at_abort, std::vector<bool>(3, true));
  const std::string first = failure_of(*works.front());
  EXPECT_TRUE(contains(first, "[nccl] allreduce #1 on rank 0 of 2 failed: NCCL error 6")) << first;
  EXPECT_TRUE(contains(last,
                       "[nccl] allreduce #3 on rank 0 of 2 was aborted with the communicator "
                       "([nccl] allreduce #1 on rank 0 of 2 failed: NCCL error 6"))
      << last;
}

TEST_F(NcclStateMachine, BrokenGroupRefusesLaterCollectivesNamingTheFirstFailure) {
  auto group = make_group();
  auto work = group->allreduce({}, ReduceOp::Sum);
  nccl.fail_async(ncclRemoteError, "");
  failure_of(*work);
  const int group_ends = nccl.count("group_end");
  auto later = group->broadcast({}, 0);
  EXPECT_TRUE(later->failed()) << "refused at once";
  const std::string message = failure_of(*later);
  EXPECT_TRUE(contains(message,
                       "[nccl] broadcast not run on rank 0 of 2: the communicator was aborted "
                       "after an earlier failure ([nccl] allreduce #1 on rank 0 of 2 failed: NCCL "
                       "error 6"))
      << message;
  EXPECT_EQ(nccl.count("group_end"), group_ends) << "no NCCL call on an aborted communicator";
  group.reset();
  EXPECT_EQ(nccl.count("comm_finalize"), 0);
  EXPECT_EQ(nccl.count("comm_abort"), 1);
}

// --- shutdown

TEST_F(NcclStateMachine, ShutdownWaitsForPendingWorkThenFinalizes) {
  auto group = make_group();
  auto work = group->allreduce({}, ReduceOp::Sum);
  nccl.script(FakeNccl::Call::Finalize, {.in_progress_polls = 2, .result = ncclSuccess});
  std::thread destroyer([&] { group.reset(); });
  fake_cuda::run_all();  // the device finishes the collective while the destructor waits
  destroyer.join();
  EXPECT_TRUE(work->completed());
  EXPECT_FALSE(work->failed());
  EXPECT_EQ(nccl.count("comm_abort"), 0);
  EXPECT_EQ(nccl.count("comm_finalize"), 1);
  EXPECT_EQ(nccl.count("comm_destroy"), 1);
}

TEST_F(NcclStateMachine, ShutdownWithWorkThatNeverEndsAbortsAtTheTimeout) {
  auto group = make_group(50ms);
  auto work = group->allreduce({}, ReduceOp::Sum);
  group.reset();
  EXPECT_TRUE(work->failed());
  EXPECT_TRUE(contains(failure_of(*work), "did not complete within 50 ms"));
  EXPECT_EQ(nccl.count("comm_finalize"), 0);
  EXPECT_EQ(nccl.count("comm_abort"), 1);
}

TEST_F(NcclStateMachine, FinalizeThatNeverFinishesIsAborted) {
  auto group = make_group(50ms);
  nccl.script(FakeNccl::Call::Finalize, {.in_progress_polls = FakeNccl::kNever});
  group.reset();
  const std::vector<std::string> calls = nccl.calls();
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls[calls.size() - 2], "comm_finalize");
  EXPECT_EQ(calls.back(), "comm_abort");
  EXPECT_EQ(nccl.count("comm_destroy"), 0);
}

// --- threads and devices

// D1: the caller's thread and the watchdog work on the group's GPU only, so no other GPU gets a
// context from this rank.
TEST_F(NcclStateMachine, OnlyTheGroupsGpuGetsAContext) {
  auto group = make_group();
  auto work = group->allreduce({}, ReduceOp::Sum);
  fake_cuda::run_all();
  work->synchronize(kBound);
  group.reset();
  EXPECT_EQ(fake_cuda::devices_with_context(), std::set<int>{1});
  // Two threads start on device 0 and move to cuda:1 once: the caller (bind_nccl_device) and the
  // watchdog. Nothing ever switches back.
  int moves = 0;
  for (const fake_cuda::Call& call : fake_cuda::calls_to("cudaSetDevice")) {
    EXPECT_EQ(call.detail, "1");
    moves += call.device == 0 ? 1 : 0;
  }
  EXPECT_EQ(moves, 2);
}

// Threads submitting collectives under a lock of their own (as DDP's Reducer does), the device
// running them, and the watchdog aborting halfway: every Work ends, nothing deadlocks, and
// ThreadSanitizer sees no lock-order inversion between that lock, the group's mutex, comm_mutex
// and the Works' own.
TEST_F(NcclStateMachine, CollectivesFromThreadsAndAnAbortDoNotDeadlock) {
  auto group = make_group();
  std::mutex reducer_mutex;
  std::vector<std::shared_ptr<Work>> works;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        std::lock_guard lock(reducer_mutex);
        works.push_back(group->allreduce({}, ReduceOp::Sum));
        try {
          works.back()->wait(kBound);  // orders the stream; rethrows once the group is aborted
        } catch (const Error&) {
        }
      }
    });
  }
  std::thread device([&] {
    for (int i = 0; i < 40; ++i) {
      fake_cuda::run_all();
      if (i == 20) nccl.fail_async(ncclRemoteError, "");
      std::this_thread::yield();
    }
  });
  for (std::thread& thread : threads) thread.join();
  device.join();
  fake_cuda::run_all();
  for (const auto& work : works) {
    // Succeeded, or failed by the abort; never left hanging (kBound's message is not these).
    const std::string message = error_message([&] { work->synchronize(kBound); });
    EXPECT_TRUE(message == "(no error)" || contains(message, "NCCL error 6") ||
                contains(message, "aborted"))
        << message;
  }
  group.reset();
  EXPECT_EQ(works.size(), 60u);
  EXPECT_LE(nccl.count("comm_abort"), 1);
}

// --- binding the device (Note [NCCL device])

TEST_F(NcclStateMachine, BindSetsTheLocalRanksDeviceOnce) {
  EXPECT_EQ(bind_nccl_device(/*rank=*/5, /*local_rank=*/1, /*local_world_size=*/2), 1);
  const std::vector<fake_cuda::Call> calls = fake_cuda::calls_to("cudaSetDevice");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].detail, "1");
  EXPECT_EQ(fake_cuda::devices_with_context(), std::set<int>{1});
}

// More local ranks than GPUs and no launcher evidence of a GPU per rank (no CUDA_VISIBLE_DEVICES,
// no Slurm): the rank fails before it makes any device current (and so before the store or NCCL).
// Three ranks on the fake's two devices; the device count is probed once per process.
TEST_F(NcclStateMachine, BindWithFewerGpusThanLocalRanksFailsBeforeTouchingTheDevice) {
  std::map<std::string, std::string> saved;
  for (const char* name : {"CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    if (const char* value = std::getenv(name)) saved[name] = value;
    ::unsetenv(name);
  }
  const std::string message = error_message([] { bind_nccl_device(0, 0, 3); });
  for (const auto& [name, value] : saved) ::setenv(name.c_str(), value.c_str(), 1);
  EXPECT_TRUE(contains(message,
                       "[nccl] rank 0: 3 processes on this machine need 3 GPUs, 2 are "
                       "visible (CUDA_VISIBLE_DEVICES unset)"))
      << message;
  EXPECT_TRUE(fake_cuda::calls_to("cudaSetDevice").empty());
}

}  // namespace
}  // namespace tandem::parallel
