#include "nn/flop_count.h"

#include "engine/autograd/grad_mode.h"
#include "engine/ops/factory.h"
#include "engine/ops/reduce.h"
#include "engine/profiler.h"

namespace tandem::nn {
namespace {

// Grad mode on for its lifetime, whatever the caller had (the count needs a backward pass).
struct GradModeOn {
  bool previous = autograd::grad_mode_enabled();
  GradModeOn() { autograd::set_grad_mode_enabled(true); }
  ~GradModeOn() { autograd::set_grad_mode_enabled(previous); }
  GradModeOn(const GradModeOn&) = delete;
  GradModeOn& operator=(const GradModeOn&) = delete;
};

}  // namespace

StepFlops count_training_flops(const Module& model, const Shape& image_shape) {
  TANDEM_CHECK(image_shape.size() == 3, "[flop_count] images are (C, H, W), got ",
               shape_str(image_shape));
  TANDEM_CHECK(!profiler::enabled(),
               "[flop_count] cannot count while a profile is being recorded; count before");
  // In evaluation mode: the same convolutions and matrix products, but batch norm from its
  // running statistics, so one image will do and a SyncBatchNorm talks to no other rank.
  const std::shared_ptr<Module> copy = model.clone();
  copy->to(Device::cpu());
  copy->set_precision(Precision::Float32);  // the same FLOPs, and no slow bfloat16 on an AVX2 CPU
  copy->eval();
  const GradModeOn grad_mode;
  StepFlops flops;
  profiler::Recording recording;
  const Tensor output = copy->forward(zeros({1, image_shape[0], image_shape[1], image_shape[2]}));
  const int64_t backward_start = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     profiler::Clock::now().time_since_epoch())
                                     .count();
  sum(output).backward();
  for (const profiler::Track& track : recording.stop().tracks) {
    for (const profiler::Event& event : track.events) {
      (event.begin_ns < backward_start ? flops.forward : flops.backward) += event.flops;
    }
  }
  return flops;
}

}  // namespace tandem::nn
