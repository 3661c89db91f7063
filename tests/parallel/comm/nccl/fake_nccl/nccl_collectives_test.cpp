// The NCCL group's operations on the fake NCCL (fake_nccl.h) and the fake CUDA runtime: which
// NCCL calls each one makes, with which counts, types, ops, roots and peers, inside one
// ncclGroupStart/End; the kernels of min and max around the group (Note [NaN in NCCL min and
// max]); sub-groups on communicators of their own. The fake moves no data (and this binary has no
// CUDA kernels but the traced fakes of fake_kernels.cpp, so the list forms, which concatenate and
// copy on the device, run only on a GPU): what is checked is what NCCL and the kernels are asked
// to do.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/tensor_impl.h"
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
using Operations = std::vector<std::string>;

// Rank 0 of a group of 3 on cuda:1 of the fake's two devices, with tensors of the caching
// allocator there (fake device memory: NCCL's fake never reads it).
class NcclCollectives : public fake_cuda::FakeCudaTest {
 protected:
  void SetUp() override {
    FakeCudaTest::SetUp();
    testing::trace_kernels_in(&nccl);
    bind_nccl_device(/*rank=*/0, /*local_rank=*/1, /*local_world_size=*/2);
    group = std::make_unique<NcclProcessGroup>(store, 0, 3, /*device=*/1,
                                               ProcessGroupOptions{.timeout = 600s}, nccl);
  }
  void TearDown() override {
    group.reset();
    testing::trace_kernels_in(nullptr);
    FakeCudaTest::TearDown();
    EXPECT_EQ(nccl.misuse(), std::vector<std::string>{});
  }

  static Tensor on_gpu(Shape shape, DType dtype = DType::Float32) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    auto storage = std::make_shared<Storage>(static_cast<size_t>(n) * dtype_size(dtype),
                                             Device::cuda(1), cuda::caching_allocator(1));
    Shape strides(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
    return Tensor(std::make_shared<TensorImpl>(storage, shape, strides, 0, dtype));
  }

  // Runs the device's queued work and waits for `work` to end without an error.
  static void finish(const std::shared_ptr<Work>& work) {
    fake_cuda::run_all();
    EXPECT_NO_THROW(work->synchronize(30s));
  }

  FakeNccl nccl;
  std::shared_ptr<Store> store =
      std::make_shared<TcpStore>(TcpStoreOptions{.port = 0, .is_server = true, .timeout = 10s});
  std::unique_ptr<NcclProcessGroup> group;
};

// Sum, Avg and Product on every type and Min and Max on int64 are NCCL's own; Min and Max on the
// floating types reduce keys (MinAndMaxOfFloatsReduceOrderedKeysAroundTheGroup).
TEST_F(NcclCollectives, EveryReduceOpButFloatMinAndMaxIsNcclsOwn) {
  const Tensor f32 = on_gpu({5}), bf16 = on_gpu({2, 3}, DType::BFloat16);
  const Tensor f16 = on_gpu({7}, DType::Float16), i64 = on_gpu({1}, DType::Int64);
  for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product}) {
    std::vector<Tensor> tensors = {f32, bf16, f16};
    if (op != ReduceOp::Avg) tensors.push_back(i64);
    finish(group->allreduce(tensors, op));
  }
  finish(group->allreduce({i64}, ReduceOp::Min));
  finish(group->allreduce({i64}, ReduceOp::Max));
  EXPECT_EQ(
      nccl.operations(),
      (Operations{"all_reduce 5 float32 sum on comm 0", "all_reduce 6 bfloat16 sum on comm 0",
                  "all_reduce 7 float16 sum on comm 0", "all_reduce 1 int64 sum on comm 0",
                  "all_reduce 5 float32 avg on comm 0", "all_reduce 6 bfloat16 avg on comm 0",
                  "all_reduce 7 float16 avg on comm 0", "all_reduce 5 float32 product on comm 0",
                  "all_reduce 6 bfloat16 product on comm 0",
                  "all_reduce 7 float16 product on comm 0", "all_reduce 1 int64 product on comm 0",
                  "all_reduce 1 int64 min on comm 0", "all_reduce 1 int64 max on comm 0"}));
  EXPECT_EQ(nccl.count("group_start"), 5) << "one group per collective";
  const std::string avg = error_message([&] { group->allreduce({i64}, ReduceOp::Avg); });
  EXPECT_TRUE(contains(avg, "[nccl] allreduce: avg does not reduce int64 tensors (tensor 0)"))
      << avg;
}

TEST_F(NcclCollectives, ReduceBroadcastAndTheFlatCollectives) {
  finish(group->reduce({on_gpu({4}), on_gpu({0})}, 2, ReduceOp::Product));
  finish(group->broadcast({on_gpu({3}, DType::Int64)}, 1));
  finish(group->allgather_into_tensor(on_gpu({3, 4}), on_gpu({4})));
  finish(group->reduce_scatter_tensor(on_gpu({4}, DType::BFloat16), on_gpu({12}, DType::BFloat16),
                                      ReduceOp::Avg));
  // Empty tensors make no NCCL call, but still a (trivial) Work.
  finish(group->reduce_scatter_tensor(on_gpu({0}), on_gpu({0})));
  EXPECT_EQ(
      nccl.operations(),
      (Operations{"reduce 4 float32 product root 2 on comm 0", "broadcast 3 int64 root 1 on comm 0",
                  "all_gather 4 float32 on comm 0", "reduce_scatter 4 bfloat16 avg on comm 0"}));
}

// Note [NaN in NCCL min and max]: a min or max of floating tensors is, on the group's stream, the
// keys of each (a kernel before the group), ncclUint32's max or min of them (int64 as it is, all
// in one group), and the values back into each tensor (a kernel after the group). TearDown checks
// that no kernel was queued inside the open group (the fake calls that misuse).
TEST_F(NcclCollectives, MinAndMaxOfFloatsReduceOrderedKeysAroundTheGroup) {
  const Tensor f32 = on_gpu({5}), bf16 = on_gpu({2, 3}, DType::BFloat16);
  const Tensor f16 = on_gpu({7}, DType::Float16), i64 = on_gpu({1}, DType::Int64);
  finish(group->allreduce({f32, bf16, i64, f16, on_gpu({0})}, ReduceOp::Max));
  EXPECT_EQ(
      nccl.operations(),
      (Operations{"kernel to_ordered_keys 5 float32 max", "kernel to_ordered_keys 6 bfloat16 max",
                  "kernel to_ordered_keys 7 float16 max", "all_reduce 5 uint32 max on comm 0",
                  "all_reduce 6 uint32 max on comm 0", "all_reduce 1 int64 max on comm 0",
                  "all_reduce 7 uint32 max on comm 0", "kernel from_ordered_keys 5 float32",
                  "kernel from_ordered_keys 6 bfloat16", "kernel from_ordered_keys 7 float16"}));
  // Each tensor's keys: written from it, reduced in place, read back into it.
  const std::vector<FakeNccl::Buffers> buffers = nccl.buffers();
  const Tensor keyed[] = {f32, bf16, f16};
  const size_t reduced_at[] = {3, 4, 6};
  for (size_t i = 0; i < 3; ++i) {
    const void* keys = buffers[i].out;
    EXPECT_EQ(buffers[i].in, keyed[i].data_ptr()) << i;
    EXPECT_NE(keys, keyed[i].data_ptr()) << i;
    EXPECT_EQ(buffers[reduced_at[i]].in, keys) << i;
    EXPECT_EQ(buffers[reduced_at[i]].out, keys) << i;
    EXPECT_EQ(buffers[7 + i].in, keys) << i;
    EXPECT_EQ(buffers[7 + i].out, keyed[i].data_ptr()) << i;
  }
  EXPECT_EQ(buffers[5].in, i64.data_ptr()) << "int64 reduced as it is";
  EXPECT_EQ(nccl.count("group_start"), 1) << "one group for every tensor";
  const cudaStream_t stream = nccl.groups().back().streams.front();
  for (const cudaStream_t s : nccl.kernel_streams()) EXPECT_EQ(s, stream) << "the group's stream";

  finish(group->allreduce({f16}, ReduceOp::Min));
  const Operations operations = nccl.operations();
  EXPECT_EQ(Operations(operations.end() - 3, operations.end()),
            (Operations{"kernel to_ordered_keys 7 float16 min", "all_reduce 7 uint32 min on comm 0",
                        "kernel from_ordered_keys 7 float16"}));
}

// The keys' scratch comes from the caching allocator on the group's stream, and goes back as soon
// as the decode is queued: nothing stays allocated, the next min or max gets the same block
// without a new segment, and the caller's stream does not get it.
TEST_F(NcclCollectives, TheKeysScratchIsTheGroupStreamsAndIsReused) {
  const Tensor t = on_gpu({1000}, DType::BFloat16);
  cuda::CachingAllocator& allocator = cuda::caching_allocator(1);
  const int64_t allocated = allocator.detailed_stats().allocated_bytes;
  finish(group->allreduce({t}, ReduceOp::Max));
  const void* keys = nccl.buffers().front().out;
  EXPECT_EQ(allocator.detailed_stats().allocated_bytes, allocated);
  const int64_t misses = allocator.detailed_stats().cache_misses;
  finish(group->allreduce({t}, ReduceOp::Min));
  EXPECT_EQ(allocator.detailed_stats().cache_misses, misses);
  EXPECT_EQ(nccl.buffers()[3].out, keys) << "the same block again";
  const Tensor same_size = on_gpu({1000});  // 4000 bytes, as the keys
  EXPECT_NE(same_size.data_ptr(), keys) << "a block of the group's stream went to the caller's";
}

// reduce: keys on every rank; only the root decodes (the others keep their tensors, as NCCL
// writes only the root's).
TEST_F(NcclCollectives, ReduceDecodesTheKeysOnTheRootOnly) {
  finish(group->reduce({on_gpu({4}, DType::Float16)}, 2, ReduceOp::Min));
  finish(group->reduce({on_gpu({4}, DType::Float16)}, 0, ReduceOp::Min));
  EXPECT_EQ(
      nccl.operations(),
      (Operations{"kernel to_ordered_keys 4 float16 min", "reduce 4 uint32 min root 2 on comm 0",
                  "kernel to_ordered_keys 4 float16 min", "reduce 4 uint32 min root 0 on comm 0",
                  "kernel from_ordered_keys 4 float16"}));
}

// reduce_scatter on rank 1 of 3: the keys of the whole input, reduced in place (NCCL's in-place
// form writes rank 1's part at its offset in them), that part decoded into the output.
TEST_F(NcclCollectives, ReduceScatterDecodesThisRanksPartOfTheKeys) {
  auto rank1 = std::make_unique<NcclProcessGroup>(store, 1, 3, /*device=*/1,
                                                  ProcessGroupOptions{.timeout = 600s}, nccl);
  {
    // Freed while the group lives: a freed block records events on the streams that used it.
    const Tensor output = on_gpu({4}, DType::BFloat16), input = on_gpu({12}, DType::BFloat16);
    finish(rank1->reduce_scatter_tensor(output, input, ReduceOp::Max));
    EXPECT_EQ(nccl.operations(), (Operations{"kernel to_ordered_keys 12 bfloat16 max",
                                             "reduce_scatter 4 uint32 max on comm 1",
                                             "kernel from_ordered_keys 4 bfloat16"}));
    const std::vector<FakeNccl::Buffers> buffers = nccl.buffers();
    const auto* keys = static_cast<const uint32_t*>(buffers[0].out);
    EXPECT_EQ(buffers[0].in, input.data_ptr());
    EXPECT_EQ(buffers[1].in, keys);
    EXPECT_EQ(buffers[1].out, keys + 4) << "rank 1's part, in place";
    EXPECT_EQ(buffers[2].in, keys + 4);
    EXPECT_EQ(buffers[2].out, output.data_ptr());
  }
  rank1.reset();
}

// gather and scatter off the root are one send or one receive (the root's side needs device
// copies and runs only on a GPU).
TEST_F(NcclCollectives, GatherAndScatterOffTheRootAreOneSendOrReceive) {
  finish(group->gather({}, on_gpu({6}), 2));
  finish(group->scatter(on_gpu({5}, DType::Float16), {}, 1));
  EXPECT_EQ(nccl.operations(),
            (Operations{"send 6 float32 to 2 on comm 0", "recv 5 float16 from 1 on comm 0"}));
  const std::string extra = error_message([&] { group->gather({on_gpu({6})}, on_gpu({6}), 2); });
  EXPECT_TRUE(contains(extra,
                       "[nccl] gather: rank 0 passed 1 output tensors, but only the root "
                       "(rank 2) receives; pass none"))
      << extra;
}

// Uneven: rank 0 sends 1 row to itself, 0 to rank 1, 2 to rank 2, and receives 1, 3, 0. Its own
// part is a device copy; the empty parts are skipped; all in one group.
TEST_F(NcclCollectives, AlltoallIsSendsAndReceivesInOneGroup) {
  const size_t copies = fake_cuda::calls_to("cudaMemcpyAsync").size();
  finish(group->alltoall_single(on_gpu({4, 2}), on_gpu({3, 2}), {1, 3, 0}, {1, 0, 2}));
  EXPECT_EQ(nccl.operations(),
            (Operations{"recv 6 float32 from 1 on comm 0", "send 4 float32 to 2 on comm 0"}));
  EXPECT_EQ(fake_cuda::calls_to("cudaMemcpyAsync").size(), copies + 1);
  EXPECT_EQ(nccl.count("group_start"), 1);
  EXPECT_EQ(nccl.count("group_end"), 1);
}

// Note [NCCL point-to-point]: no tags (refused, not ignored: review H4), no receive from any
// source; each isend or irecv is a group of its own.
TEST_F(NcclCollectives, PointToPointIsSendAndRecvWithoutTags) {
  finish(group->isend(on_gpu({8}), 2));
  auto received = group->irecv(on_gpu({2}, DType::Int64), 1);
  finish(received);
  EXPECT_EQ(received->source_rank(), 1);
  EXPECT_EQ(nccl.operations(),
            (Operations{"send 8 float32 to 2 on comm 0", "recv 2 int64 from 1 on comm 0"}));
  EXPECT_EQ(nccl.groups().size(), 2u);
  const std::string tagged = error_message([&] { group->isend(on_gpu({8}), 2, /*tag=*/5); });
  EXPECT_TRUE(contains(tagged,
                       "[nccl] isend: tag 5: NCCL has no tags and matches sends to receives by "
                       "their order alone"))
      << tagged;
  const std::string tagged_recv = error_message([&] { group->irecv(on_gpu({2}), 1, 9); });
  EXPECT_TRUE(contains(tagged_recv, "[nccl] irecv: tag 9: NCCL has no tags")) << tagged_recv;
  const std::string any = error_message([&] { group->irecv(on_gpu({2}), kAnySource); });
  EXPECT_TRUE(contains(any, "[nccl] irecv: NCCL cannot receive from any source")) << any;
  const std::string self = error_message([&] { group->isend(on_gpu({2}), 0); });
  EXPECT_TRUE(contains(self, "[nccl] isend: dst 0 is this rank")) << self;
  EXPECT_EQ(nccl.operations().size(), 2u) << "a refused call queued something";
}

// Review H2: an exchange (this rank sends to and receives from rank 1, and from rank 2) must be
// one NCCL group, or each send waits for a receive the peer queued behind its own send.
// batch_isend_irecv() makes it one group, on the group's stream, not the caller's.
TEST_F(NcclCollectives, AnExchangeIsOneGroupOnTheGroupsStream) {
  const size_t before = nccl.groups().size();
  const std::vector<std::shared_ptr<Work>> works = group->batch_isend_irecv(
      {P2POp::send(on_gpu({4}), 1), P2POp::recv(on_gpu({4}), 1),
       P2POp::recv(on_gpu({3}, DType::BFloat16), 2), P2POp::send(on_gpu({0}), 2),
       P2POp::send(on_gpu({2}, DType::Int64), 2)});
  ASSERT_EQ(works.size(), 5u);
  for (const std::shared_ptr<Work>& work : works) EXPECT_EQ(work, works.front()) << "one group";
  finish(works.front());
  const std::vector<FakeNccl::Group> groups = nccl.groups();
  ASSERT_EQ(groups.size(), before + 1);
  const FakeNccl::Group& exchange = groups.back();
  EXPECT_EQ(exchange.operations,
            (Operations{"send 4 float32 to 1 on comm 0", "recv 4 float32 from 1 on comm 0",
                        "recv 3 bfloat16 from 2 on comm 0", "send 2 int64 to 2 on comm 0"}));
  ASSERT_EQ(exchange.streams.size(), 4u);
  for (const cudaStream_t stream : exchange.streams) {
    EXPECT_EQ(stream, exchange.streams.front()) << "one stream for the whole group";
  }
  EXPECT_NE(exchange.streams.front(), cuda::current_stream(1))
      << "on the group's own stream (Note [NCCL stream order])";
  // A collective after it is its own group on that same stream.
  finish(group->allreduce({on_gpu({1})}));
  EXPECT_EQ(nccl.groups().back().operations, Operations{"all_reduce 1 float32 sum on comm 0"});
  EXPECT_EQ(nccl.groups().back().streams, std::vector{exchange.streams.front()});

  const std::string tagged =
      error_message([&] { group->batch_isend_irecv({P2POp::send(on_gpu({1}), 1, /*tag=*/3)}); });
  EXPECT_TRUE(contains(tagged, "[nccl] batch_isend_irecv (op 0): tag 3: NCCL has no tags"))
      << tagged;
  const std::string any = error_message([&] {
    group->batch_isend_irecv({P2POp::send(on_gpu({1}), 1), P2POp::recv(on_gpu({1}), -1)});
  });
  EXPECT_TRUE(contains(any, "[nccl] batch_isend_irecv: op 1 receives from any source")) << any;
  const std::string self =
      error_message([&] { group->batch_isend_irecv({P2POp::recv(on_gpu({1}), 0)}); });
  EXPECT_TRUE(contains(self,
                       "[nccl] batch_isend_irecv (op 0, irecv): src 0 is this rank; a rank cannot "
                       "receive from itself"))
      << self;
  EXPECT_TRUE(group->batch_isend_irecv({}).empty());
  EXPECT_EQ(nccl.groups().size(), before + 2) << "a refused or empty batch queued something";
}

// Review H5: a throw while the calls are queued (here the root's own part of an all-to-all, a
// device copy) still closes the group before the communicator is aborted; an open group would
// have deferred the abort, and every later NCCL call of the thread, into it.
TEST_F(NcclCollectives, AThrowWhileQueuingClosesTheGroupBeforeTheAbort) {
  fake_cuda::fail_next("cudaMemcpyAsync", cudaErrorInvalidValue);
  auto work = group->alltoall_single(on_gpu({4, 2}), on_gpu({3, 2}), {1, 3, 0}, {1, 0, 2});
  EXPECT_TRUE(work->failed());
  const std::string message = error_message([&] { work->synchronize(30s); });
  EXPECT_TRUE(contains(message, "[nccl] alltoall_single #1 on rank 0 of 3 failed: ")) << message;
  EXPECT_TRUE(contains(message, "the communicator was aborted")) << message;
  std::vector<std::string> calls = nccl.calls();
  const auto from = std::find(calls.begin(), calls.end(), "group_start");
  EXPECT_EQ(std::vector<std::string>(from, calls.end()),
            (std::vector<std::string>{"group_start", "group_end", "comm_abort"}));
  EXPECT_EQ(nccl.misuse(), std::vector<std::string>{}) << "no group left open, no abort in one";
}

// A sub-group's communicator is its own, met under its parent's prefix with a new unique id; a
// non-member makes no NCCL call and gets a group that refuses use.
TEST_F(NcclCollectives, SubgroupsGetACommunicatorOfTheirOwn) {
  auto outside = group->new_group({1, 2});
  EXPECT_EQ(outside->rank(), -1);
  EXPECT_EQ(nccl.communicators(), 1);
  const std::string refused = error_message([&] { outside->allreduce({on_gpu({1})}); });
  EXPECT_TRUE(contains(refused,
                       "[nccl] allreduce: this rank is not a member of this group (ranks "
                       "1 and 2 of the group it was made from)"))
      << refused;
  auto solo = group->new_group({0});
  EXPECT_EQ(solo->rank(), 0);
  EXPECT_EQ(solo->size(), 1);
  EXPECT_EQ(solo->tensor_device(), Device::cuda(1));
  EXPECT_EQ(nccl.communicators(), 2);
  EXPECT_EQ(nccl.count("get_unique_id"), 2);
  // The second new_group() of the parent: its keys under the parent's prefix, "sub1/".
  EXPECT_TRUE(store->check({"nccl/1/sub1/unique_id"}));
  {
    // Freed while both groups live: a freed block records events on the streams that used it,
    // and the caching allocator does not forget a stream that is destroyed first.
    const Tensor t = on_gpu({3});
    finish(solo->allreduce({t}, ReduceOp::Min));
    finish(group->allreduce({t}));
  }
  EXPECT_EQ(
      nccl.operations(),
      (Operations{"kernel to_ordered_keys 3 float32 min", "all_reduce 3 uint32 min on comm 1",
                  "kernel from_ordered_keys 3 float32", "all_reduce 3 float32 sum on comm 0"}));
  solo.reset();
  EXPECT_EQ(nccl.count("comm_destroy"), 1) << "the sub-group's communicator, not the parent's";
}

}  // namespace
}  // namespace tandem::parallel
