#include "engine/cuda/cublas_library.h"

#include <dlfcn.h>

#include <string>

#include "engine/error.h"

// Set by engine/CMakeLists.txt: the file CMake found, and its soname as a fallback.
#if !defined(TANDEM_CUBLAS_LIBRARY) || !defined(TANDEM_CUBLAS_SONAME)
#error "engine/CMakeLists.txt must define TANDEM_CUBLAS_LIBRARY and TANDEM_CUBLAS_SONAME"
#endif

namespace tandem::cuda {
namespace {

std::string loader_error() {
  const char* message = dlerror();
  return message != nullptr ? message : "unknown error";
}

template <typename Function>
void resolve(void* library, const std::string& file, const char* symbol, Function& function) {
  function = reinterpret_cast<Function>(dlsym(library, symbol));
  TANDEM_CHECK(function != nullptr, "[cublas] ", file, " has no ", symbol, ": ", loader_error());
}

CublasLibrary load() {
  std::string file = TANDEM_CUBLAS_LIBRARY;
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const std::string first_error = loader_error();
    file = TANDEM_CUBLAS_SONAME;
    library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    TANDEM_CHECK(library != nullptr, "[cublas] cannot load cuBLAS: ", first_error, "; ",
                 loader_error());
  }
  // Never closed: handles and kernels live until the process ends.
  CublasLibrary functions{};
  resolve(library, file, "cublasCreate_v2", functions.create);
  resolve(library, file, "cublasSetStream_v2", functions.set_stream);
  resolve(library, file, "cublasSetWorkspace_v2", functions.set_workspace);
  resolve(library, file, "cublasSetMathMode", functions.set_math_mode);
  resolve(library, file, "cublasSgemm_v2", functions.sgemm);
  resolve(library, file, "cublasGemmEx", functions.gemm_ex);
  resolve(library, file, "cublasGetStatusName", functions.status_name);
  resolve(library, file, "cublasGetStatusString", functions.status_string);
  return functions;
}

}  // namespace

const CublasLibrary& cublas() {
  static const CublasLibrary library = load();  // a failed load is retried on the next call
  return library;
}

}  // namespace tandem::cuda
