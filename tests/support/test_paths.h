#pragma once
/// Paths in the checkout and the build that tests read. They are compiled into test_paths.cpp
/// alone: an absolute path on every test's compile command would make a clone in another folder
/// miss the compiler cache for all of them (Note [Compiler cache] in scripts/build_env.sh).

namespace tandem::testing {

extern const char* const kTrainCifarProgram;       ///< this build's apps/train_cifar
extern const char* const kTandemRunProgram;        ///< this build's apps/tandem-run
extern const char* const kBenchCifarProgram;       ///< this build's apps/bench_cifar
extern const char* const kCifar10Dir;              ///< the real CIFAR-10 (scripts/get_cifar10.sh)
extern const char* const kFuzzCorpusDir;           ///< tests/fuzz/corpus
extern const char* const kTorchStorePeerScript;    ///< tests/interop/torch_store_peer.py
extern const char* const kTorchCollectivesScript;  ///< tests/interop/torch_collectives.py
extern const char* const kTorchGradScalerScript;   ///< tests/interop/torch_grad_scaler.py

}  // namespace tandem::testing
