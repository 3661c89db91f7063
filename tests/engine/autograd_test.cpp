#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "engine/autograd/engine.h"
#include "engine/tandem.h"

namespace tandem {
namespace {

Tensor leaf(const std::vector<float>& values, const Shape& shape, Device device = Device::cpu()) {
  return from_vector(values, shape, {.device = device, .requires_grad = true});
}

TEST(Autograd, DiamondGraphSumsBothPaths) {
  Tensor x = leaf({1, 2, 3}, {3});
  Tensor a = x * 2.0f;
  Tensor b = x * 3.0f;
  sum(a * b).backward();  // d/dx Σ 6x² = 12x
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{12, 24, 36}));
}

TEST(Autograd, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = leaf({1, -2}, {2});
  sum(x * x).backward();
  sum(x * x).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, -8}));
}

TEST(Autograd, RetainGraphAllowsASecondBackward) {
  Tensor x = leaf({3}, {1});
  Tensor y = sum(x * x);
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{12}));
}

TEST(Autograd, SecondBackwardWithoutRetainGraphIsAnError) {
  Tensor x = leaf({3}, {1});
  Tensor y = sum(x * x);
  y.backward();
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos) << e.what();
  }
}

TEST(Autograd, HooksRunAfterAccumulationInRegistrationOrder) {
  Tensor x = leaf({1, 2}, {2});
  std::vector<std::string> calls;
  x.register_post_accumulate_grad_hook([&](const Tensor& t) {
    calls.push_back("first:" + std::to_string(t.grad().to_vector<float>()[1]));
  });
  const int second =
      x.register_post_accumulate_grad_hook([&](const Tensor&) { calls.push_back("second"); });
  sum(x * x).backward();
  EXPECT_EQ(calls, (std::vector<std::string>{"first:4.000000", "second"}));
  x.remove_hook(second);
  calls.clear();
  sum(x).backward();
  EXPECT_EQ(calls, (std::vector<std::string>{"first:5.000000"}));
}

TEST(Autograd, LeafHooksFireInReverseOrderOfUse) {
  // DDP's buckets rely on parameters becoming ready roughly in reverse forward order.
  Tensor w1 = leaf({2}, {1});
  Tensor w2 = leaf({3}, {1});
  Tensor w3 = leaf({4}, {1});
  std::vector<int> order;
  w1.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back(1); });
  w2.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back(2); });
  w3.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back(3); });
  Tensor x = from_vector<float>({1}, {1});
  Tensor h = relu(x * w1);
  h = relu(h * w2);
  h = relu(h * w3);
  sum(h).backward();
  EXPECT_EQ(order, (std::vector<int>{3, 2, 1}));
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = leaf({1, 2}, {2});
  Tensor y;
  {
    NoGradGuard no_grad;
    EXPECT_FALSE(autograd::grad_mode_enabled());
    y = x * 2.0f;
  }
  EXPECT_TRUE(autograd::grad_mode_enabled());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
  EXPECT_THROW(sum(y).backward(), Error);
}

TEST(Autograd, DetachCutsTheGraph) {
  Tensor x = leaf({2}, {1});
  Tensor y = x * x;
  Tensor z = y.detach() * x;  // only the explicit x factor is differentiated: dz/dx = y = 4
  sum(z).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4}));
  EXPECT_EQ(y.detach().storage(), y.storage());
}

TEST(Autograd, OnlyOneElementTensorsMayOmitTheGradient) {
  Tensor x = leaf({1, 2}, {2});
  EXPECT_THROW((x * 2.0f).backward(), Error);
  (x * 2.0f).backward(from_vector<float>({1, 10}, {2}));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 20}));
}

TEST(Autograd, ErrorInsideBackwardReachesTheCaller) {
  Tensor x = leaf({1}, {1});
  x.register_post_accumulate_grad_hook([](const Tensor&) { TANDEM_FAIL("[test] hook failed"); });
  try {
    sum(x * x).backward();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[test] hook failed"), std::string::npos);
  }
  // The engine is still usable afterwards.
  Tensor y = leaf({1}, {1});
  sum(y * 3.0f).backward();
  EXPECT_EQ(y.grad().to_vector<float>(), (std::vector<float>{3}));
}

TEST(Autograd, BackwardInsideAHookIsRejected) {
  Tensor x = leaf({1}, {1});
  x.register_post_accumulate_grad_hook([](const Tensor&) {
    Tensor y = from_vector<float>({1}, {1}, {.requires_grad = true});
    sum(y).backward();
  });
  EXPECT_THROW(sum(x).backward(), Error);
}

// Note [Per-device backward threads] in engine/autograd/engine.h.
TEST(Autograd, OneCpuDeviceRunsOnTheCallingThreadAndRestoresItsState) {
  Tensor w = leaf({1, 2, 3}, {3}, Device::cpu());
  std::thread::id hook_thread;
  bool grad_mode_in_hook = true;
  w.register_post_accumulate_grad_hook([&](const Tensor&) {
    hook_thread = std::this_thread::get_id();
    grad_mode_in_hook = autograd::grad_mode_enabled();
  });
  sum(w * w).backward();
  EXPECT_EQ(hook_thread, std::this_thread::get_id());
  EXPECT_FALSE(grad_mode_in_hook);             // backward is never recorded, on any thread
  EXPECT_TRUE(autograd::grad_mode_enabled());  // and the caller gets its own mode back
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 4, 6}));
  // A hook may not start another backward; the caller can once this one returned.
  Tensor v = leaf({1}, {1}, Device::cpu());
  v.register_post_accumulate_grad_hook([](const Tensor& t) { sum(t * t).backward(); });
  EXPECT_THROW(sum(v * v).backward(), Error);
  sum(w * w).backward();
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{4, 8, 12}));
}

TEST(Autograd, GraphAcrossTwoCpuDevicesRunsOnEachDevicesThread) {
  // Note [Backward on the calling thread]: the root's device (cpu:0) runs on the caller, cpu:1 on
  // its own worker, at the same time.
  const Device d0 = Device::cpu(0);
  const Device d1 = Device::cpu(1);
  Tensor w0 = leaf({1, 2, 3}, {3}, d0);
  Tensor w1 = leaf({4, 5, 6}, {3}, d1);
  std::mutex mutex;
  std::thread::id thread0, thread1;
  int threads_seen0 = 0, threads_seen1 = 0;
  w0.register_post_accumulate_grad_hook([&](const Tensor&) {
    std::lock_guard lock(mutex);
    thread0 = std::this_thread::get_id();
    threads_seen0 = num_threads();
  });
  w1.register_post_accumulate_grad_hook([&](const Tensor&) {
    std::lock_guard lock(mutex);
    thread1 = std::this_thread::get_id();
    threads_seen1 = num_threads();
  });

  // A replica-like split: half the work on cpu:1, results gathered back on cpu:0.
  Tensor x = from_vector<float>({1, 1, 2}, {3}, {.device = d0});
  Tensor on1 = x.to(d1) * w1;
  Tensor loss = sum(x * w0) + sum(on1).to(d0);
  {
    ThreadCountGuard threads(2);
    loss.backward();
  }

  EXPECT_EQ(w0.grad().to_vector<float>(), (std::vector<float>{1, 1, 2}));
  EXPECT_EQ(w1.grad().device(), d1);
  EXPECT_EQ(w1.grad().to_vector<float>(), (std::vector<float>{1, 1, 2}));
  EXPECT_EQ(thread0, std::this_thread::get_id());
  EXPECT_NE(thread1, std::thread::id());
  EXPECT_NE(thread1, std::this_thread::get_id());
  // The caller's two threads are shared between the two devices of the graph.
  EXPECT_EQ(threads_seen0, 1);
  EXPECT_EQ(threads_seen1, 1);
}

TEST(Autograd, GradientFlowsBackAcrossDeviceCopies) {
  Tensor x = leaf({1, 2}, {2}, Device::cpu(0));
  Tensor y = x.to(Device::cpu(1));
  sum(y * y).backward();
  EXPECT_EQ(x.grad().device(), Device::cpu(0));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 4}));
}

TEST(Autograd, OnlyLeavesCanBeMarked) {
  Tensor x = leaf({1}, {1});
  Tensor y = x * 2.0f;
  EXPECT_FALSE(y.is_leaf());
  EXPECT_THROW(y.set_requires_grad(false), Error);
  EXPECT_THROW(zeros({1}, {.dtype = DType::Int64}).set_requires_grad(true), Error);
}

TEST(Autograd, QueuedCallbacksRunAfterTheWholePassOnTheCallingThread) {
  Tensor a = leaf({1, 2}, {2});
  Tensor b = leaf({3, 4}, {2});
  std::vector<std::string> events;
  std::thread::id callback_thread;
  bool b_done_when_called = false;
  a.register_post_accumulate_grad_hook([&](const Tensor&) {
    events.push_back("hook a");
    autograd::queue_callback([&] {
      events.push_back("callback");
      callback_thread = std::this_thread::get_id();
      b_done_when_called = b.grad().defined();
    });
  });
  // a's leaf is reached first (b feeds a later op), so the callback is queued before b is done.
  sum(mul(a * 2.0f, b)).backward();
  ASSERT_EQ(events, (std::vector<std::string>{"hook a", "callback"}));
  EXPECT_EQ(callback_thread, std::this_thread::get_id());
  EXPECT_TRUE(b_done_when_called);
}

TEST(Autograd, QueueCallbackOutsideBackwardIsAnError) {
  EXPECT_THROW(autograd::queue_callback([] {}), Error);
}

TEST(Autograd, AccumulatorsRunAsSoonAsReadyEvenWhenAnOlderGraphIsAlive) {
  // The previous step's graph keeps w's accumulator (and its old sequence number) alive. It must
  // still run right after w's gradient is complete, before the rest of the pass: DDP's overlap
  // depends on it (Note [Accumulate first]).
  Tensor w = leaf({2}, {1});
  Tensor previous_loss = sum(mul(leaf({1}, {1}), w));
  std::vector<std::string> order;
  w.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("w"); });
  Tensor x = leaf({3}, {1});  // fresh this step: its accumulator is newer than everything else
  x.register_post_accumulate_grad_hook([&](const Tensor&) { order.push_back("x"); });
  sum(mul(exp(x), w)).backward();
  EXPECT_EQ(order, (std::vector<std::string>{"w", "x"}));
  EXPECT_TRUE(previous_loss.requires_grad());
}

}  // namespace
}  // namespace tandem
