// Prints what nn::count_training_flops() (Note [Counting FLOPs] in nn/flop_count.h) counts for a
// ResNet on 32×32 images, as JSON, for tests/interop/pytorch_flop_count.py to compare with
// PyTorch's own count of the same architecture.
//
//   count_flops ARCH     → {"forward": 81626368, "backward": 162368000}

#include <cstdio>
#include <iostream>

#include "engine/error.h"
#include "nn/flop_count.h"
#include "nn/resnet.h"

int main(int argc, char** argv) try {
  using namespace tandem;
  if (argc != 2) {
    std::cerr << "usage: count_flops ARCH\n";
    return 2;
  }
  Generator generator(0);
  const nn::StepFlops flops =
      nn::count_training_flops(*nn::make_resnet(argv[1], generator), {3, 32, 32});
  std::printf("{\"forward\": %.0f, \"backward\": %.0f}\n", flops.forward, flops.backward);
  return 0;
} catch (const std::exception& e) {
  std::cerr << tandem::message_of(e) << "\n";
  return 1;
}
