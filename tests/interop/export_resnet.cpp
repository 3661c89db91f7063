// Writes what tests/interop/check_pytorch_load.py reads: a ResNet's weights as a Tandem
// checkpoint, plus an input batch and Tandem's eval-mode logits for it. FORMAT is the model's
// memory format while it runs and is saved (contiguous by default): the file is NCHW either way.
//
//   export_resnet ARCH OUT_DIR [channels_last|contiguous]

#include <iostream>

#include "engine/tandem.h"
#include "nn/resnet.h"
#include "nn/safetensors.h"

int main(int argc, char** argv) try {
  using namespace tandem;
  if (argc != 3 && argc != 4) {
    std::cerr << "usage: export_resnet ARCH OUT_DIR [channels_last|contiguous]\n";
    return 2;
  }
  const std::string arch = argv[1], dir = argv[2];
  const MemoryFormat format = argc == 4 ? parse_memory_format(argv[3]) : MemoryFormat::Contiguous;
  Generator generator(123);
  const auto model = nn::make_resnet(arch, generator);
  model->to(format);
  // Two training-mode passes give non-trivial running statistics and counters.
  for (int i = 0; i < 2; ++i) {
    (*model)(randn({8, 3, 32, 32}, generator, {}, 0.5f).contiguous(format));
  }
  model->eval();
  const Tensor input = randn({4, 3, 32, 32}, generator);
  NoGradGuard no_grad;
  const Tensor logits = (*model)(input.contiguous(format));
  nn::save_safetensors(dir + "/model.safetensors", model->state_dict(), {{"format", "pt"}});
  nn::save_safetensors(dir + "/io.safetensors", {{"input", input}, {"logits", logits}});
  return 0;
} catch (const std::exception& e) {
  std::cerr << "export_resnet: " << e.what() << "\n";
  return 1;
}
