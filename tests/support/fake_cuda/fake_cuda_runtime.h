#pragma once
/// A fake CUDA runtime for unit tests of the CUDA host code (device guards, streams, events,
/// the caching and pinned allocators, and the CUDA backend's launches) on machines without a GPU.
///
/// Note [Fake CUDA runtime]: fake_cuda_api.cpp defines the few libcudart functions that
/// engine/cuda/{device,stream,caching_allocator,pinned_allocator,cuda_check}.cpp call, compiled
/// against the real CUDA headers and linked instead of libcudart, so the engine's own sources
/// run unmodified. fake_cuda_launch.cpp adds the entry points of nvcc's launch code, and
/// fake_cudnn.cpp a cuDNN, so that the whole CUDA backend runs on it too
/// (tests/engine/cuda/backend_host): every kernel launch and cuDNN call is traced with its
/// arguments, and none computes anything. It models what those files rely on:
/// - a per-thread current device (0 on a new thread) and last error (cudaGetLastError clears it;
///   every failing call sets it);
/// - primary contexts: created by cudaSetDevice and by any call that needs one on the current
///   device, as the CUDA 12+ runtime does; cuDevicePrimaryCtxGetState (through
///   cudaGetDriverEntryPointByVersion) reports them;
/// - streams as queues of work items (a kernel launch, a wait for an event) that complete only
///   when the test runs them (run(), run_all()) or the host synchronises; events complete when
///   their stream has run up to the point where they were recorded; a destroyed stream's handle
///   is handed to the next new stream, as a driver may do;
/// - a cudaMalloc budget per device (cudaErrorMemoryAllocation beyond it);
/// - device memory as addresses only: nothing may read or write it on the host, and copies
///   (queued like kernels) move no bytes;
/// - a trace of every call with the calling thread's device, errors scripted per function, and
///   violations of the API's rules (an event recorded on another device's stream, cudaFree
///   while work is still queued on the device, an unknown handle, work queued on a stream of a
///   device that is not current).
/// Every function is thread-safe (one mutex), so the tests also run under ThreadSanitizer.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::fake_cuda {

struct Config {
  int device_count = 2;
  /// What cudaDriverGetVersion reports (the CUDA version the driver supports); 0: no driver.
  int driver_version = CUDART_VERSION;
  /// What cudaGetDeviceCount returns (cudaErrorInsufficientDriver for a driver too old, say).
  cudaError_t device_count_error = cudaSuccess;
  size_t memory_bytes = size_t{1} << 30;  ///< cudaMalloc budget of each device
  bool peer_access = true;                ///< cudaDeviceCanAccessPeer between two devices
  /// Devices in EXCLUSIVE_PROCESS compute mode held by another process: making one current
  /// fails with cudaErrorDevicesUnavailable.
  std::vector<int> busy_devices = {};
};

struct Call {
  std::string function;  ///< e.g. "cudaSetDevice"
  int device = 0;        ///< the calling thread's current device when it called
  std::string detail;    ///< the arguments that matter, e.g. "1" or "stream S2 of cuda:0"
};

/// Starts a test: forgets the trace, violations, scripted errors, contexts, memory use and every
/// thread's current device and last error, and completes all queued work. Streams, events and
/// allocations made before stay valid.
void reset(const Config& config = {});

/// Every call since reset(), in order (cudaGetLastError and cudaPeekAtLastError left out).
std::vector<Call> calls();
/// The calls to `function` since reset().
std::vector<Call> calls_to(std::string_view function);
/// The API rules broken since reset(), one line each.
std::vector<std::string> violations();

/// The next `times` calls of `function` fail with `error` (and do nothing else).
void fail_next(std::string_view function, cudaError_t error, int times = 1);

/// Devices with a primary context since reset().
std::set<int> devices_with_context();

/// Runs the work queued so far on `stream` (nullptr: the legacy default stream of `device`),
/// with everything it waits for.
void run(cudaStream_t stream, int device);
/// Runs all queued work of every stream.
void run_all();
/// Work items queued on `stream` (of `device`) and not yet run.
int64_t queued(cudaStream_t stream, int device);
/// Bytes currently held through cudaMalloc on `device` (since reset()).
int64_t device_bytes_in_use(int device);
/// Pages currently held through cudaHostAlloc (made since reset()).
int64_t host_bytes_in_use();

/// Queues one work item on `stream` as a kernel launch does (the real <<<>>> is not called).
void launch(cudaStream_t stream);

}  // namespace tandem::fake_cuda
