#pragma once
/// How much arithmetic a training step of a model is: what "GFLOP/s" and "% of peak" in
/// bench_cifar, train_cifar's summary and the profiler's table are measured against.
///
/// Note [Counting FLOPs]: a FLOP is one floating-point multiply or add, so a multiply-accumulate
/// (MAC) is 2. Counted are the convolutions (2·N·K·P·Q·C·R·S each) and matrix products
/// (2·M·N·K) that run, and nothing else: batch norm, ReLU, the residual adds, pooling, the loss
/// and the optimizer are a few FLOPs per value and memory-bound, as torch.utils.flop_counter and
/// fvcore count too. A training step is forward, then for each layer the gradient of its input
/// and the gradient of its weights, each as many FLOPs as its forward: about 3× the forward.
/// "What runs" is what the op front-ends report to the profiler (engine/profiler.h), so the count
/// follows the code rather than a table: the first convolution computes no input gradient (the
/// images need none), and a layer added to a model is counted without a line here. ResNet-20
/// (option-B shortcuts, 32×32 images): 81.6 MFLOP forward and 244 MFLOP per image per training
/// step; the CIFAR ResNet-18: 1.11 GFLOP forward, 3.33 GFLOP per training step.

#include "engine/shape.h"
#include "nn/module.h"

namespace tandem::nn {

/// FLOPs of one image's training step (Note [Counting FLOPs]).
struct StepFlops {
  double forward = 0;   ///< convolutions and matrix products of the forward pass
  double backward = 0;  ///< their input and weight gradients
  double total() const { return forward + backward; }
};

/// Counts what a training step of `model` on images of `image_shape` (C, H, W) computes, per
/// image (FLOPs grow with the batch in proportion), by running one forward and backward pass of a
/// float32 copy of it on the CPU on one image. The model itself is untouched. Not while a
/// profiler::Recording is running (it uses one): throws then.
StepFlops count_training_flops(const Module& model, const Shape& image_shape);

}  // namespace tandem::nn
