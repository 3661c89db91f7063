// The CUDA backend's singleton and its settings (cuda_backend() of engine/backend/backend.h). The
// device-level methods are the runtime's: engine/cuda/runtime/cuda_runtime.cpp.

#include <cstdlib>
#include <string_view>

#include "engine/cuda/cuda_backend.h"

namespace tandem {
namespace {

bool env_flag(const char* name, bool fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') return fallback;
  const std::string_view text(value);
  return !(text == "0" || text == "false" || text == "off" || text == "no");
}

}  // namespace

namespace cuda {

CudaBackend::CudaBackend()
    : allow_tf32_(env_flag("TANDEM_ALLOW_TF32", false)),
      cudnn_benchmark_(env_flag("TANDEM_CUDNN_BENCHMARK", true)) {}

CudaBackend& backend() {
  static auto* instance = new CudaBackend();  // Note [Leaked singletons]
  return *instance;
}

}  // namespace cuda

Backend& cuda_backend() {
  return cuda::backend();
}

}  // namespace tandem
