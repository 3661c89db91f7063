#include "tests/support/test_paths.h"

// The values come from tests/CMakeLists.txt, on this file only.
namespace tandem::testing {

const char* const kTrainCifarProgram = TANDEM_TRAIN_CIFAR;
const char* const kTandemRunProgram = TANDEM_TANDEM_RUN;
const char* const kBenchCifarProgram = TANDEM_BENCH_CIFAR;
const char* const kCifar10Dir = TANDEM_CIFAR10_DIR;
const char* const kFuzzCorpusDir = TANDEM_FUZZ_CORPUS;
const char* const kTorchStorePeerScript = TANDEM_TORCH_STORE_PEER;
const char* const kTorchCollectivesScript = TANDEM_TORCH_COLLECTIVES;
const char* const kTorchGradScalerScript = TANDEM_TORCH_GRAD_SCALER;

}  // namespace tandem::testing
