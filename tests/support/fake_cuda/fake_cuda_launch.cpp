// The libcudart entry points that nvcc's generated code calls to register kernels and to launch
// them (kernel<<<grid, block, shared, stream>>>), for the CUDA backend's own kernels on the fake
// runtime (Note [Fake CUDA runtime]). The engine's .cu objects link against these unmodified, so
// every launch of the real launchers is traced as a call to "cudaLaunchKernel" with the kernel's
// name and geometry ("tandem::cuda::kernels::...<...> grid (16, 33, 1) block (256, 1, 1) on S1 of
// cuda:0") and queued on its stream; no kernel runs. A geometry that CUDA would refuse fails as
// CUDA fails (cudaErrorInvalidConfiguration).

#include <cuda_runtime_api.h>
#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tests/support/fake_cuda/fake_cuda_state.h"

using tandem::fake_cuda::detail::enter;
using tandem::fake_cuda::detail::finish;
using tandem::fake_cuda::detail::queue_kernel;
using tandem::fake_cuda::detail::State;
using tandem::fake_cuda::detail::state;

namespace {

// Kernels by the host address that the generated code launches them with. Registration runs
// during static initialisation, before any test, and outlives reset().
struct Kernels {
  std::mutex mutex;
  std::map<const void*, std::string> names;
};

Kernels& kernels() {
  static auto* instance = new Kernels;  // never destroyed: launches may come late at exit
  return *instance;
}

std::string demangled(const char* name) {
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> readable(
      abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && readable ? readable.get() : name;
}

std::string kernel_name(const void* kernel) {
  Kernels& k = kernels();
  std::lock_guard lock(k.mutex);
  const auto it = k.names.find(kernel);
  return it == k.names.end() ? "an unregistered kernel" : it->second;
}

// "(16, 33, 1)", appended piece by piece: GCC 12's -Wrestrict misfires on "(" + std::string.
std::string triple(dim3 d) {
  std::string out = std::to_string(d.x);
  out.insert(out.begin(), '(');
  out += ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
  return out;
}

// What the hardware accepts (compute capability 9.0).
bool launchable(dim3 grid, dim3 block) {
  const unsigned long long threads = static_cast<unsigned long long>(block.x) * block.y * block.z;
  return grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 2147483647u && grid.y <= 65535 &&
         grid.z <= 65535 && threads >= 1 && threads <= 1024 && block.z <= 64;
}

struct Configuration {
  dim3 grid, block;
  size_t shared = 0;
  cudaStream_t stream = nullptr;
};

// The <<<...>>> of the launch under way on this thread (pushed, then popped by the kernel's stub).
std::vector<Configuration>& configurations() {
  thread_local std::vector<Configuration> stack;
  return stack;
}

}  // namespace

extern "C" {

// --- registration (nvcc's static initialisers)

void** __cudaRegisterFatBinary(void* /*fat_cubin*/) {
  static void* handle = nullptr;
  return &handle;
}

void __cudaRegisterFatBinaryEnd(void** /*handle*/) {}

void __cudaUnregisterFatBinary(void** /*handle*/) {}

void __cudaRegisterFunction(void** /*handle*/, const char* host_function, char* /*device_function*/,
                            const char* device_name, int /*thread_limit*/, uint3* /*tid*/,
                            uint3* /*bid*/, dim3* /*block*/, dim3* /*grid*/, int* /*warp_size*/) {
  Kernels& k = kernels();
  std::lock_guard lock(k.mutex);
  k.names[host_function] = demangled(device_name);
}

void __cudaRegisterVar(void** /*handle*/, char* /*host_variable*/, char* /*device_address*/,
                       const char* /*device_name*/, int /*ext*/, size_t /*size*/, int /*constant*/,
                       int /*global*/) {}

// --- launches

unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, CUstream_st* stream) {
  configurations().push_back({grid, block, shared, stream});
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared, void* stream) {
  auto& stack = configurations();
  if (stack.empty()) return cudaErrorMissingConfiguration;
  const Configuration top = stack.back();
  stack.pop_back();
  *grid = top.grid;
  *block = top.block;
  *shared = top.shared;
  *static_cast<cudaStream_t*>(stream) = top.stream;
  return cudaSuccess;
}

cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* function) {
  *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(function));
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** /*args*/,
                               size_t /*shared*/, cudaStream_t stream) {
  const std::string what =
      kernel_name(kernel) + " grid " + triple(grid) + " block " + triple(block);
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (const cudaError_t scripted = enter(s, "cudaLaunchKernel", what); scripted != cudaSuccess) {
    return finish(s, scripted);
  }
  if (!launchable(grid, block)) return finish(s, cudaErrorInvalidConfiguration);
  return queue_kernel(s, stream, what);
}

}  // extern "C"
