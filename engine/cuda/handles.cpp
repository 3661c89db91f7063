#include "engine/cuda/handles.h"
#include "engine/cuda/cublas_check.h"

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/cuda/cublas_library.h"
#include "engine/cuda/cudnn_check.h"
#include "engine/cuda/runtime/caching_allocator.h"
#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/stream.h"
#include "engine/cuda/runtime/version_check.h"

namespace tandem::cuda {
namespace {

// Note [Handle pools]: handles are created on the device they serve and pooled per device. A
// thread leases one per device on first use and returns it at thread exit (the autograd
// workers and DataParallel threads come and go; their handles are reused, never re-created).
// The pools are never destroyed, so no cudnnDestroy runs after the CUDA runtime has shut down
// at process exit, which can crash; the driver reclaims the handles with the process.
template <typename Handle>
class HandlePool {
 public:
  using Create = Handle (*)(int device);

  HandlePool(int device, Create create) : device_(device), create_(create) {}

  Handle acquire() {
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        const Handle handle = free_.back();
        free_.pop_back();
        return handle;
      }
    }
    return create_(device_);
  }

  void release(Handle handle) noexcept {
    std::lock_guard lock(mutex_);
    free_.push_back(handle);
  }

 private:
  int device_;
  Create create_;
  std::mutex mutex_;
  std::vector<Handle> free_;
};

cublasHandle_t create_cublas(int device) {
  DeviceGuard guard(device);
  cublasHandle_t handle = nullptr;
  CUBLAS_CHECK(cublas().create(&handle));
  return handle;
}

cudnnHandle_t create_cudnn(int device) {
  // A cuDNN built for another CUDA major fails here in one line, not later in an unrelated call.
  static const bool cudnn_matches_the_toolkit =
      (check_cuda_major("cudnn", static_cast<int>(cudnnGetCudartVersion()), CUDART_VERSION), true);
  (void)cudnn_matches_the_toolkit;
  DeviceGuard guard(device);
  cudnnHandle_t handle = nullptr;
  CUDNN_CHECK(cudnnCreate(&handle));
  return handle;
}

template <typename Handle>
HandlePool<Handle>& pool_for(int device, typename HandlePool<Handle>::Create create) {
  static std::mutex mutex;
  static auto* pools = new std::vector<std::unique_ptr<HandlePool<Handle>>>(device_count());
  std::lock_guard lock(mutex);
  auto& pool = (*pools)[static_cast<size_t>(device)];
  if (!pool) pool = std::make_unique<HandlePool<Handle>>(device, create);
  return *pool;
}

/// The handles one thread holds, one per device, returned to their pools at thread exit.
template <typename Handle>
class ThreadLease {
 public:
  using Create = typename HandlePool<Handle>::Create;

  ~ThreadLease() {
    for (size_t device = 0; device < handles_.size(); ++device) {
      if (handles_[device] != nullptr) pools_[device]->release(handles_[device]);
    }
  }

  Handle get(int device, Create create) {
    check_device(device, "handles");
    const auto index = static_cast<size_t>(device);
    if (handles_.size() <= index) {
      handles_.resize(index + 1, nullptr);
      pools_.resize(index + 1, nullptr);
    }
    if (handles_[index] == nullptr) {
      pools_[index] = &pool_for<Handle>(device, create);
      handles_[index] = pools_[index]->acquire();
    }
    return handles_[index];
  }

 private:
  std::vector<Handle> handles_;
  std::vector<HandlePool<Handle>*> pools_;
};

// Note [cuBLAS workspaces]: cublasSetStream resets the handle to cuBLAS's default workspace
// pool, which all the streams the handle is used on share, so two GEMMs of one handle on streams
// that run at once would share scratch memory. Each (handle, stream) pair therefore gets its own
// workspace, set after every cublasSetStream, as PyTorch does. It comes from the caching
// allocator on that stream, in cuBLAS's recommended size. The stream is known by its id (Note
// [Stream ids]): a later stream with a destroyed one's handle gets a workspace of its own, not
// one that the destroyed stream's queued GEMMs may still use. A Stream's workspaces are freed
// when it is destroyed (its blocks then retire to the default stream once its work has run);
// the default stream's are kept for the process like the handles (Note [Handle pools]).
size_t cublas_workspace_bytes(int device) {
  constexpr size_t kMiB = size_t{1} << 20;
  return device_properties(device).major >= 9 ? 32 * kMiB : 4 * kMiB;  // Hopper and later: 32
}

struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
  CachingAllocator* allocator = nullptr;
};

struct Workspaces {
  std::mutex mutex;
  std::map<std::pair<cublasHandle_t, uint64_t>, Workspace> by_stream;  ///< (handle, stream id)
};

void release_workspaces(int device, uint64_t id) noexcept;

Workspaces& workspaces() {
  static auto* all = [] {
    on_stream_retired(&release_workspaces);
    return new Workspaces;  // Note [Handle pools]
  }();
  return *all;
}

// A retired stream's workspaces go back to the allocator, on that stream: its GEMMs still queued
// come before any reuse.
void release_workspaces(int /*device*/, uint64_t id) noexcept {
  Workspaces& all = workspaces();
  std::lock_guard lock(all.mutex);
  std::erase_if(all.by_stream, [&](const auto& entry) {
    if (entry.first.second != id) return false;
    const Workspace& workspace = entry.second;
    workspace.allocator->deallocate(workspace.ptr, workspace.bytes);
    return true;
  });
}

void* cublas_workspace(cublasHandle_t handle, cudaStream_t stream, int device, size_t bytes) {
  const uint64_t id = stream_info(stream, device).id;
  Workspaces& all = workspaces();
  std::lock_guard lock(all.mutex);
  const auto [it, inserted] = all.by_stream.try_emplace({handle, id});
  if (inserted) {
    try {
      CachingAllocator& allocator = caching_allocator(device);
      it->second = {allocator.allocate(bytes, stream), bytes, &allocator};
    } catch (...) {
      all.by_stream.erase(it);
      throw;
    }
  }
  return it->second.ptr;
}

}  // namespace

cublasHandle_t cublas_handle(int device) {
  thread_local ThreadLease<cublasHandle_t> lease;
  const cublasHandle_t handle = lease.get(device, &create_cublas);
  const cudaStream_t stream = current_stream(device);
  const CublasLibrary& library = cublas();
  CUBLAS_CHECK(library.set_stream(handle, stream));
  const size_t bytes = cublas_workspace_bytes(device);
  CUBLAS_CHECK(
      library.set_workspace(handle, cublas_workspace(handle, stream, device, bytes), bytes));
  return handle;
}

cudnnHandle_t cudnn_handle(int device) {
  thread_local ThreadLease<cudnnHandle_t> lease;
  const cudnnHandle_t handle = lease.get(device, &create_cudnn);
  CUDNN_CHECK(cudnnSetStream(handle, current_stream(device)));
  return handle;
}

}  // namespace tandem::cuda
