// The NCCL process group and DDP on CUDA tensors. Suites ending in "Gpu" need a GPU (CTest label
// gpu) and skip with the reason where there is none; with one GPU they run a world of size 1,
// with two or more also two ranks. "Nccl.*" runs anywhere: the errors a machine without a GPU,
// or a wrong tensor, gives.
//
// NEVER RUN ON A GPU YET: the Gpu tests were written and compiled on a machine without one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "engine/tandem.h"
#include "engine/tensor_impl.h"
#include "nn/resnet.h"
#include "parallel/comm/gloo/gloo_process_group.h"
#include "parallel/comm/init_process_group.h"
#include "parallel/comm/nccl/nccl_process_group.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm/rendezvous/store_server.h"
#include "parallel/distributed_data_parallel.h"
#include "tests/support/cuda_skip.h"
#include "tests/support/error_message.h"
#include "tests/support/spawn_ranks.h"
#include "tests/support/tensor_compare.h"

#if TANDEM_WITH_CUDA
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "tests/support/cuda_busy_wait.h"
#endif

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using testing::contains;
using testing::error_message;

// --- anywhere

TEST(Nccl, WithoutAGpuInitFailsAtOnceBeforeTheStore) {
  if (cuda_available()) GTEST_SKIP() << "this machine has a GPU (NcclProcessGroupGpu.* cover it)";
  // Rank 1 of 2 with nobody hosting the store: reaching for the store would wait 60 s.
  DistributedEnv env;
  env.rank = 1;
  env.world_size = 2;
  env.local_rank = 1;
  env.local_world_size = 2;
  env.master_port = 1;  // nothing listens there
  const auto start = std::chrono::steady_clock::now();
  const std::string message =
      error_message([&] { init_process_group("nccl", env, {.timeout = 60s}); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "it waited for the store";
#if TANDEM_WITH_CUDA
  EXPECT_TRUE(contains(message, "[nccl] rank 1 needs a GPU for the NCCL process group, but "))
      << message;
  EXPECT_TRUE(contains(message, "use the gloo backend on CPUs")) << message;
#else
  EXPECT_TRUE(contains(message, "[nccl] this build has no CUDA, so no NCCL process group"))
      << message;
#endif
}

// The dtype and reduce-op rules are the same for every backend (CollectiveChecks.*).
TEST(Nccl, PlacementChecksNameTheBackendTheOpAndTheDevice) {
  const Tensor cpu = zeros({4});
  const std::string wrong_device =
      error_message([&] { check_nccl_placement("allreduce", 0, cpu, Device::cuda(0)); });
  EXPECT_TRUE(contains(wrong_device,
                       "[nccl] allreduce: tensor 0 is on cpu:0; the NCCL process group takes "
                       "CUDA tensors on cuda:0 (use the gloo backend for CPU tensors)"))
      << wrong_device;
  // The density check does not depend on the device, so a CPU "group device" reaches it here.
  const Tensor t = zeros({2, 3});
  const Tensor strided(
      std::make_shared<TensorImpl>(t.storage(), Shape{3, 2}, Shape{1, 3}, 0, DType::Float32));
  const std::string non_contiguous =
      error_message([&] { check_nccl_placement("broadcast", 1, strided, Device::cpu()); });
  EXPECT_TRUE(contains(non_contiguous, "[nccl] broadcast: tensor 1 is not dense"))
      << non_contiguous;
  EXPECT_TRUE(
      contains(error_message([&] { check_nccl_placement("reduce", 2, Tensor(), Device::cpu()); }),
               "[nccl] reduce: tensor 2 is undefined"));
  EXPECT_NO_THROW(check_nccl_placement("allgather", 0, cpu, Device::cpu()));
}

TEST(Nccl, DdpSaysWhenTheModelIsNotOnTheGroupsDevice) {
  auto store =
      std::make_shared<TcpStore>(TcpStoreOptions{.port = 0, .is_server = true, .timeout = 10s});
  GlooProcessGroup gloo(store, 0, 1, {.timeout = 10s});
  EXPECT_EQ(gloo.tensor_device(), Device::cpu());
  const std::string message =
      error_message([&] { check_parameters_device(gloo, Device::cuda(0)); });
  EXPECT_TRUE(contains(message,
                       "[DDP] the model's parameters are on cuda:0, but the gloo process group "
                       "takes tensors on cpu:0: move the model to cpu:0 (or use the nccl backend"))
      << message;
  EXPECT_NO_THROW(check_parameters_device(gloo, Device::cpu()));
}

#if TANDEM_WITH_CUDA

// --- one GPU: a world of size 1

// `init_timeout` bounds NCCL's start-up (review H1: hundreds of ms, more under ctest -j 8), so a
// short `timeout` bounds only the collectives.
std::shared_ptr<ProcessGroup> solo_nccl_group(std::chrono::milliseconds timeout = 30s,
                                              std::chrono::milliseconds init_timeout = 60s) {
  auto store =
      std::make_shared<TcpStore>(TcpStoreOptions{.port = 0, .is_server = true, .timeout = 10s});
  return make_nccl_process_group(store, 0, 1, /*device=*/0,
                                 {.timeout = timeout, .init_timeout = init_timeout});
}

const Device kGpu = Device::cuda(0);

TEST(NcclProcessGroupGpu, CollectivesOnASoloGroup) {
  TANDEM_SKIP_WITHOUT_CUDA();
  auto group = solo_nccl_group();
  EXPECT_EQ(group->backend_name(), "nccl");
  EXPECT_EQ(group->tensor_device(), kGpu);

  Tensor a = from_vector<float>({1, 2, 3}, {3}, {.device = kGpu});
  Tensor b = from_vector<float>({-4, 5}, {2}, {.device = kGpu});
  Tensor empty_one = zeros({0}, {.device = kGpu});
  group->allreduce({a, b, empty_one}, ReduceOp::Sum)->wait();
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{-4, 5}));
  group->allreduce({a}, ReduceOp::Avg)->wait();
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor counts = from_vector<int64_t>({7, 8}, {2}, {.dtype = DType::Int64, .device = kGpu});
  group->allreduce({counts}, ReduceOp::Sum)->synchronize();
  EXPECT_EQ(counts.to_vector<int64_t>(), (std::vector<int64_t>{7, 8}));

  // The 16-bit types that gradient compression sends (NCCL's own ncclBfloat16, ncclFloat16).
  Tensor bf16 = a.to(DType::BFloat16);
  Tensor fp16 = b.to(DType::Float16);
  group->allreduce({bf16, fp16}, ReduceOp::Avg)->wait();
  EXPECT_EQ(bf16.to(DType::Float32).to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(fp16.to(DType::Float32).to_vector<float>(), (std::vector<float>{-4, 5}));

  group->broadcast({a, counts}, 0)->wait();
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3}));

  std::vector<Tensor> outputs{zeros({3}, {.device = kGpu})};
  group->allgather(outputs, a)->wait();
  EXPECT_EQ(outputs[0].to_vector<float>(), (std::vector<float>{1, 2, 3}));

  auto barrier = group->barrier();
  barrier->wait();  // blocks the host
  EXPECT_TRUE(barrier->completed());
  EXPECT_FALSE(barrier->failed());
  EXPECT_GE(barrier->ended_at(), barrier->started_at());
}

// The operations beyond DDP's on one GPU: the root's side of gather and scatter (device copies),
// the list forms (concatenated and copied out on the device), reduce, reduce-scatter, all-to-all,
// a sub-group. Written without a GPU: NEVER RUN YET.
TEST(NcclProcessGroupGpu, EveryOtherCollectiveOnASoloGroup) {
  TANDEM_SKIP_WITHOUT_CUDA();
  auto group = solo_nccl_group();
  const Tensor a = from_vector<float>({1, 2, 3}, {3}, {.device = kGpu});
  for (const ReduceOp op : {ReduceOp::Product, ReduceOp::Min, ReduceOp::Max}) {
    Tensor t = a.clone();
    group->reduce({t}, 0, op)->wait();
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3})) << reduce_op_name(op);
  }
  std::vector<Tensor> gathered{zeros({3}, {.device = kGpu})};
  group->gather(gathered, a, 0)->wait();
  EXPECT_EQ(gathered[0].to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor scattered = zeros({3}, {.device = kGpu});
  group->scatter(scattered, {a}, 0)->wait();
  EXPECT_EQ(scattered.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor reduced = zeros({3}, {.device = kGpu});
  group->reduce_scatter(reduced, {a}, ReduceOp::Avg)->wait();
  EXPECT_EQ(reduced.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor flat = zeros({3}, {.device = kGpu});
  group->reduce_scatter_tensor(flat, a)->wait();
  group->allgather_into_tensor(flat, a)->wait();
  EXPECT_EQ(flat.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  Tensor exchanged = zeros({3, 1}, {.device = kGpu});
  group->alltoall_single(exchanged, a.view({3, 1}), {3}, {3})->wait();
  EXPECT_EQ(exchanged.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  std::vector<Tensor> outputs{zeros({3}, {.device = kGpu})};
  group->alltoall(outputs, {a})->wait();
  EXPECT_EQ(outputs[0].to_vector<float>(), (std::vector<float>{1, 2, 3}));
  auto sub = group->new_group({0});
  Tensor t = a.clone();
  sub->allreduce({t}, ReduceOp::Sum)->synchronize();
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

// Note [NaN in NCCL min and max]: min and max of floating tensors go through the key kernels and
// ncclUint32 and come back as they were (a NaN as a NaN, -0 as -0) on a group of one; the NaN of
// one rank among two is in DdpNcclGpu.TwoRanksAllReduceAndMatchOneProcess. Written without a
// GPU: NEVER RUN YET.
TEST(NcclProcessGroupGpu, MinAndMaxKeepANaNOnASoloGroup) {
  TANDEM_SKIP_WITHOUT_CUDA();
  auto group = solo_nccl_group();
  const std::vector<float> values = {1.5f, NAN, -INFINITY, -0.0f, 65504.0f};
  for (const DType dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
    const Tensor x = from_vector<float>(values, {5}, {.device = kGpu}).to(dtype);
    const std::vector<float> expected = x.to(DType::Float32).to_vector<float>();
    for (const ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
      Tensor all = x.clone(), reduced = x.clone();
      Tensor part = zeros({5}, {.dtype = dtype, .device = kGpu});
      group->allreduce({all}, op)->wait();
      group->reduce({reduced}, 0, op)->wait();
      group->reduce_scatter_tensor(part, x, op)->wait();
      for (const Tensor& t : {all, reduced, part}) {
        const std::vector<float> got = t.to(DType::Float32).to_vector<float>();
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_TRUE(std::isnan(expected[i])
                          ? std::isnan(got[i])
                          : got[i] == expected[i] &&
                                std::signbit(got[i]) == std::signbit(expected[i]))
              << dtype_name(dtype) << " " << reduce_op_name(op) << ", element " << i << ": "
              << got[i];
        }
      }
    }
  }
}

TEST(NcclProcessGroupGpu, RefusesCpuTensorsAndBadArgumentsOnTheCallersThread) {
  TANDEM_SKIP_WITHOUT_CUDA();
  auto group = solo_nccl_group();
  const std::string cpu = error_message([&] { group->allreduce({zeros({2})}, ReduceOp::Sum); });
  EXPECT_TRUE(contains(cpu,
                       "[nccl] allreduce: tensor 0 is on cpu:0; the NCCL process group takes "
                       "CUDA tensors on cuda:0"))
      << cpu;
  const std::string root =
      error_message([&] { group->broadcast({zeros({2}, {.device = kGpu})}, 1); });
  EXPECT_TRUE(contains(root, "[nccl] broadcast: root 1 is out of range for 1 ranks")) << root;
  std::vector<Tensor> two{zeros({2}, {.device = kGpu}), zeros({2}, {.device = kGpu})};
  const std::string outputs =
      error_message([&] { group->allgather(two, zeros({2}, {.device = kGpu})); });
  EXPECT_TRUE(contains(outputs, "[nccl] allgather: got 2 output tensors for 1 ranks")) << outputs;
  // The group is still usable.
  group->barrier()->wait();
}

// Note [NCCL stream order]: a kernel queued on the caller's stream before the collective is seen
// by it, though NCCL's stream does not synchronise with the default stream by itself; wait()
// leaves the host free, synchronize() does not.
TEST(NcclProcessGroupGpu, CollectivesFollowTheCallersStreamAndWaitDoesNotBlockTheHost) {
  TANDEM_SKIP_WITHOUT_CUDA();
  auto group = solo_nccl_group();
  Tensor input = zeros({1024}, {.device = kGpu});
  std::vector<Tensor> outputs{zeros({1024}, {.device = kGpu})};
  cuda::busy_wait(cuda::current_stream(0), 0, 500.0);  // the compute stream is busy for 0.5 s
  input.fill_(7.0);                                    // then sets the input
  auto work = group->allgather(outputs, input);
  work->wait();
  // The busy kernel still runs, so neither the copy nor the collective has: wait() returned at
  // once, without blocking the host.
  EXPECT_FALSE(work->completed());
  work->synchronize();
  EXPECT_TRUE(work->completed());
  const std::vector<float> got = outputs[0].to_vector<float>();
  EXPECT_EQ(got.front(), 7.0f);
  EXPECT_EQ(got.back(), 7.0f);
  // And the other way: kernels queued on the caller's stream after wait() see the result. The
  // output is written only by NCCL's stream (a gather into a flat buffer, then a 16 MB copy-out),
  // so a read not ordered behind it would start right after the busy kernel and see zeros.
  const int64_t n = int64_t{4} << 20;
  Tensor source = zeros({n}, {.device = kGpu});
  std::vector<Tensor> gathered{zeros({n}, {.device = kGpu})};
  cuda::busy_wait(cuda::current_stream(0), 0, 200.0);
  source.fill_(3.0);
  group->allgather(gathered, source)->wait();
  const std::vector<float> doubled = mul(gathered[0], 2.0f).to_vector<float>();
  EXPECT_EQ(doubled.front(), 6.0f);
  EXPECT_EQ(doubled.back(), 6.0f);
}

// Note [NCCL watchdog]: a collective that cannot finish within the timeout (here it waits behind
// a busy compute stream) fails with one line naming it, the communicator is aborted, and the
// group refuses later collectives at once instead of hanging. The 300 ms bound only the
// collectives: start-up has init_timeout, and a barrier first makes NCCL set up its first
// collective before the busy kernel (review H1).
TEST(NcclProcessGroupGpu, TheWatchdogFailsACollectivePastTheTimeoutAndAborts) {
  TANDEM_SKIP_WITHOUT_CUDA();
  auto group = solo_nccl_group(/*timeout=*/300ms, /*init_timeout=*/60s);
  group->barrier()->wait();
  Tensor x = zeros({16}, {.device = kGpu});
  cuda::busy_wait(cuda::current_stream(0), 0, 3000.0);
  auto work = group->allreduce({x}, ReduceOp::Sum);
  const std::string message = error_message([&] { work->synchronize(10s); });
  EXPECT_TRUE(contains(message,
                       "[nccl] allreduce #2 on rank 0 of 1 did not complete within "
                       "300 ms"))
      << message;
  EXPECT_TRUE(contains(message, "the communicator was aborted")) << message;
  EXPECT_TRUE(work->failed());
  const std::string later = error_message([&] { group->barrier()->wait(); });
  EXPECT_TRUE(contains(later,
                       "[nccl] barrier not run on rank 0 of 1: the communicator was "
                       "aborted after an earlier failure"))
      << later;
  cuda::Stream::default_stream(0).synchronize();  // the busy kernel, before the next test
}

TEST(NcclProcessGroupGpu, InitProcessGroupPicksTheLocalRanksGpu) {
  TANDEM_SKIP_WITHOUT_CUDA();
  StoreServer server;
  DistributedEnv env;
  env.master_port = server.port();
  env.store_host = StoreHost::TandemRun;
  env.local_rank = cuda::device_count();  // one past the last GPU
  const std::string message = error_message([&] { init_process_group("nccl", env); });
  EXPECT_TRUE(contains(message, "[nccl] rank 0 needs cuda:" + std::to_string(env.local_rank) +
                                    " (its local rank), but this machine has"))
      << message;
  env.local_rank = 0;
  auto group = init_process_group("nccl", env, {.timeout = 30s});
  EXPECT_EQ(group->tensor_device(), kGpu);
}

// --- DDP on one GPU

// The DDP tests' batch: eight random images with fixed labels, on `device`.
struct EightImages {
  Tensor images;
  Tensor labels;
};

EightImages eight_images(Device device) {
  Generator data(11);
  const std::vector<int64_t> label_values{1, 4, 7, 0, 3, 6, 9, 2};
  return {randn({8, 3, 32, 32}, data).to(device),
          from_vector(label_values, {8}, {.dtype = DType::Int64, .device = device})};
}

// ResNet-20 initialised from `seed` on `device`; DDP wraps it with several small buckets.
std::shared_ptr<nn::ResNet> resnet20_on(Device device, uint64_t seed) {
  Generator init(seed);
  auto model = nn::make_resnet("resnet20", init);
  model->to(device);
  return model;
}

DdpOptions small_buckets() {
  DdpOptions options;
  options.reducer.first_bucket_mb = 0.25;
  options.reducer.bucket_cap_mb = 0.25;
  return options;
}

// Batch-norm in eval mode as in ddp_multiprocess_test.cpp; with one rank DDP's gradient is the
// plain model's up to float32 rounding (the scaling by 1/world is by 1).
TEST(DdpNcclGpu, ResNet20OnOneGpuMatchesThePlainModel) {
  TANDEM_SKIP_WITHOUT_CUDA();
  const auto [images, labels] = eight_images(kGpu);
  auto reference = resnet20_on(kGpu, 7);
  reference->eval();
  DistributedDataParallel model(resnet20_on(kGpu, 7), solo_nccl_group(), small_buckets());
  model.eval();
  // Three steps: the buckets are rebuilt at the second (a broadcast read by the host).
  for (int step = 0; step < 3; ++step) {
    reference->zero_grad();
    model.zero_grad();
    cross_entropy(reference->forward(images), labels).backward();
    cross_entropy(model.forward(images), labels).backward();
    const auto expected = reference->named_parameters();
    const auto actual = model.module().named_parameters();
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(actual[i].second.grad().device(), kGpu);
      testing::expect_close_to_reference(actual[i].second.grad(), expected[i].second.grad(),
                                         expected[i].first + ".grad, step " + std::to_string(step));
    }
  }
  EXPECT_GT(model.reducer().bucket_assignment().size(), 2u);
  const ReducerStepStats stats = model.reducer().timer().last_step();  // waits for the device
  EXPECT_EQ(stats.buckets.size(), model.reducer().bucket_assignment().size());
}

// --- two GPUs or more: real ranks

bool fewer_than_two_gpus(std::string& reason) {
  if (!cuda_available()) {
    reason = cuda_unavailable_reason();
    return true;
  }
  if (cuda::device_count() < 2) {
    reason = "needs 2 CUDA devices, this machine has " + std::to_string(cuda::device_count());
    return true;
  }
  return false;
}

TEST(DdpNcclGpu, TwoRanksAllReduceAndMatchOneProcess) {
  std::string reason;
  if (fewer_than_two_gpus(reason)) GTEST_SKIP() << reason;
  TANDEM_RUN_AS_RANKS(2, testing::SpawnOptions{.timeout = 180s});
  const DistributedEnv env = from_environment();
  auto group = init_process_group("nccl", env, {.timeout = 60s});
  const Device gpu = Device::cuda(env.local_rank);
  ASSERT_EQ(group->tensor_device(), gpu);

  Tensor x = full({4}, group->rank() + 1.0, {.device = gpu});
  group->allreduce({x}, ReduceOp::Sum)->wait();
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>(4, 3.0f)));
  group->allreduce({x}, ReduceOp::Avg)->wait();
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>(4, 3.0f)));
  Tensor halves = full({3}, group->rank() + 0.5, {.dtype = DType::BFloat16, .device = gpu});
  group->allreduce({halves}, ReduceOp::Sum)->wait();
  EXPECT_EQ(halves.to(DType::Float32).to_vector<float>(), (std::vector<float>(3, 2.0f)));
  // Note [NaN in NCCL min and max]: a NaN on one rank comes out of max and min on both.
  for (const ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) {
    Tensor nan_on_one = from_vector<float>({group->rank() == 0 ? NAN : 1.0f, 2.0f + group->rank()},
                                           {2}, {.device = gpu})
                            .to(DType::BFloat16);
    group->allreduce({nan_on_one}, op)->wait();
    const std::vector<float> got = nan_on_one.to(DType::Float32).to_vector<float>();
    EXPECT_TRUE(std::isnan(got[0])) << reduce_op_name(op) << ": " << got[0];
    EXPECT_EQ(got[1], op == ReduceOp::Max ? 3.0f : 2.0f) << reduce_op_name(op);
  }
  Tensor b = full({2}, group->rank() == 1 ? 5.0 : 0.0, {.device = gpu});
  group->broadcast({b}, 1)->wait();
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>(2, 5.0f)));
  std::vector<Tensor> all{zeros({1}, {.device = gpu}), zeros({1}, {.device = gpu})};
  group->allgather(all, full({1}, 10.0 * group->rank(), {.device = gpu}))->wait();
  EXPECT_EQ(all[0].item(), 0.0);
  EXPECT_EQ(all[1].item(), 10.0);
  // Review H2: an exchange of 32 MiB each way, past NCCL's buffers, as one group; two isend()
  // then irecv() would hang here.
  const int peer = 1 - group->rank();
  const Tensor mine = full({int64_t{8} << 20}, group->rank() + 1.0, {.device = gpu});
  Tensor theirs = zeros({int64_t{8} << 20}, {.device = gpu});
  for (const auto& work :
       group->batch_isend_irecv({P2POp::send(mine, peer), P2POp::recv(theirs, peer)})) {
    work->wait();
  }
  EXPECT_EQ(theirs.to_vector<float>().back(), peer + 1.0f);

  // DDP: each rank takes half of the batch; ranks start from different weights.
  const auto [images, labels] = eight_images(gpu);
  auto reference = resnet20_on(gpu, 7);
  reference->eval();
  cross_entropy(reference->forward(images), labels).backward();
  DistributedDataParallel model(resnet20_on(gpu, 7 + static_cast<uint64_t>(group->rank())), group,
                                small_buckets());
  model.eval();
  const int64_t start = 4 * group->rank();
  cross_entropy(model.forward(images.slice(start, start + 4)), labels.slice(start, start + 4))
      .backward();
  const auto expected = reference->named_parameters();
  const auto actual = model.module().named_parameters();
  for (size_t i = 0; i < expected.size(); ++i) {
    testing::expect_close_to_reference(actual[i].second.grad(), expected[i].second.grad(),
                                       expected[i].first + ".grad");
  }
  group->barrier()->wait();
}

// The processes nvidia-smi lists as holding a context on each GPU: (pid, GPU UUID) pairs; empty
// where nvidia-smi is missing or cannot see this process (another PID namespace).
std::vector<std::pair<int, std::string>> compute_apps() {
  std::vector<std::pair<int, std::string>> apps;
  FILE* pipe =
      popen("nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv,noheader 2>/dev/null", "r");
  if (pipe == nullptr) return apps;
  char line[256];
  while (fgets(line, sizeof line, pipe) != nullptr) {
    int pid = 0;
    char uuid[128] = {};
    if (sscanf(line, "%d, %127s", &pid, uuid) == 2) apps.emplace_back(pid, uuid);
  }
  pclose(pipe);
  return apps;
}

// The UUID of a CUDA device as nvidia-smi prints it (CUDA and nvidia-smi may number GPUs
// differently, so the UUID is what identifies one).
std::string uuid_of(int device) {
  const cudaUUID_t& uuid = cuda::device_properties(device).uuid;
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    char hex[3];
    snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    text += hex;
    if (i == 3 || i == 5 || i == 7 || i == 9) text += '-';
  }
  return text;
}

// Review D1: every backend call's DeviceGuard used to make GPU 0 current again on exit, so each
// rank also created a context on GPU 0 (hundreds of MiB each; a crash under EXCLUSIVE_PROCESS).
// After a DDP step, a rank must hold a context on its own GPU only.
TEST(DdpNcclGpu, EachRankHoldsAContextOnItsOwnGpuOnly) {
  std::string reason;
  if (fewer_than_two_gpus(reason)) GTEST_SKIP() << reason;
  TANDEM_RUN_AS_RANKS(2, testing::SpawnOptions{.timeout = 180s});
  const DistributedEnv env = from_environment();
  auto group = init_process_group("nccl", env, {.timeout = 60s});
  const Device gpu = Device::cuda(env.local_rank);
  const auto [images, labels] = eight_images(gpu);
  DistributedDataParallel model(resnet20_on(gpu, 7), group, small_buckets());
  cross_entropy(model.forward(images), labels).backward();
  runtime_for(gpu).synchronize(gpu);
  group->barrier()->wait();

  const int pid = static_cast<int>(getpid());
  std::vector<std::string> held;
  for (const auto& [app_pid, uuid] : compute_apps()) {
    if (app_pid == pid) held.push_back(uuid);
  }
  if (held.empty()) {
    group->barrier()->wait();
    GTEST_SKIP() << "nvidia-smi does not list this process (another PID namespace?)";
  }
  EXPECT_EQ(held, std::vector<std::string>{uuid_of(env.local_rank)})
      << "rank " << env.rank << " holds contexts on other GPUs";
  group->barrier()->wait();
}

#endif  // TANDEM_WITH_CUDA

}  // namespace
}  // namespace tandem::parallel
