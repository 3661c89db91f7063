// The libcudart functions of the fake runtime (Note [Fake CUDA runtime]). They are declared
// extern "C" by cuda_runtime_api.h, so these definitions replace the real library at link time.

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "tests/support/fake_cuda/fake_cuda_state.h"

using tandem::fake_cuda::detail::enter;
using tandem::fake_cuda::detail::EventState;
using tandem::fake_cuda::detail::find_stream;
using tandem::fake_cuda::detail::finish;
using tandem::fake_cuda::detail::State;
using tandem::fake_cuda::detail::state;
using tandem::fake_cuda::detail::StreamState;
using tandem::fake_cuda::detail::thread_state;
using tandem::fake_cuda::detail::touch_context;

namespace {

// Every function starts like this: the lock, the trace entry, and a scripted failure if any.
#define FAKE_ENTER(detail)                                                                  \
  State& s = state();                                                                       \
  std::lock_guard lock(s.mutex);                                                            \
  if (const cudaError_t scripted = enter(s, __func__, (detail)); scripted != cudaSuccess) { \
    return finish(s, scripted);                                                             \
  }

// "S3", "E5" (built so that GCC 12's -Wrestrict false positive on short literals stays quiet).
std::string numbered(char prefix, size_t number) {
  std::string name = std::to_string(number);
  name.insert(name.begin(), prefix);
  return name;
}

std::string handle_name(const void* handle) {
  return std::to_string(reinterpret_cast<uintptr_t>(handle));
}

EventState* find_event(State& s, cudaEvent_t event) {
  const auto it = s.events.find(reinterpret_cast<uintptr_t>(event));
  if (it != s.events.end()) return &it->second;
  s.violations.push_back("unknown event " + handle_name(event));
  return nullptr;
}

std::shared_ptr<StreamState> stream_or_violation(State& s, cudaStream_t stream) {
  auto found = find_stream(s, stream);
  if (!found) s.violations.push_back("unknown or destroyed stream " + handle_name(stream));
  return found;
}

bool valid_device(const State& s, int device) {
  return device >= 0 && device < s.config.device_count;
}

void run_device(State& s, int device) {
  for (const auto& stream : s.all_streams) {
    if (stream->device == device) {
      tandem::fake_cuda::detail::run_until(*stream, static_cast<int64_t>(stream->items.size()));
    }
  }
  const auto& main = s.default_streams[static_cast<size_t>(device)];
  tandem::fake_cuda::detail::run_until(*main, static_cast<int64_t>(main->items.size()));
}

bool device_busy(const State& s, int device) {
  auto busy = [&](const StreamState& stream) {
    return stream.device == device && stream.completed < static_cast<int64_t>(stream.items.size());
  };
  for (const auto& stream : s.all_streams) {
    if (busy(*stream)) return true;
  }
  return busy(*s.default_streams[static_cast<size_t>(device)]);
}

// The two driver functions that engine/cuda/runtime/device.cpp fetches through
// cudaGetDriverEntryPointByVersion.
CUresult CUDAAPI fake_cu_device_get(CUdevice* device, int ordinal) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!valid_device(s, ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI fake_cu_primary_ctx_get_state(CUdevice device, unsigned int* flags, int* active) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  enter(s, "cuDevicePrimaryCtxGetState", std::to_string(device));
  *flags = 0;
  *active = s.contexts.count(device) > 0 ? 1 : 0;
  return CUDA_SUCCESS;
}

}  // namespace

extern "C" {

// --- errors

cudaError_t cudaGetLastError() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const cudaError_t error = thread_state(s).last_error;
  thread_state(s).last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return thread_state(s).last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorDevicesUnavailable: return "cudaErrorDevicesUnavailable";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorPeerAccessAlreadyEnabled: return "cudaErrorPeerAccessAlreadyEnabled";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    default: return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorDevicesUnavailable: return "CUDA-capable device(s) is/are busy or unavailable";
    default: return "fake CUDA error";
  }
}

// --- devices

cudaError_t cudaDriverGetVersion(int* version) {
  FAKE_ENTER("");
  *version = s.config.driver_version;
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  FAKE_ENTER("");
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int* count) {
  FAKE_ENTER("");
  *count = 0;
  if (s.config.device_count_error != cudaSuccess) return finish(s, s.config.device_count_error);
  *count = s.config.device_count;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  FAKE_ENTER("");
  *device = thread_state(s).device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  FAKE_ENTER(std::to_string(device));
  if (!valid_device(s, device)) return finish(s, cudaErrorInvalidDevice);
  for (int busy : s.config.busy_devices) {
    if (busy == device) return finish(s, cudaErrorDevicesUnavailable);
  }
  thread_state(s).device = device;
  touch_context(s);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* properties, int device) {
  FAKE_ENTER(std::to_string(device));
  if (!valid_device(s, device)) return finish(s, cudaErrorInvalidDevice);
  std::memset(properties, 0, sizeof(*properties));
  std::strncpy(properties->name, "Fake GPU", sizeof(properties->name) - 1);
  properties->totalGlobalMem = s.config.memory_bytes;
  properties->major = 9;
  properties->multiProcessorCount = 132;
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  FAKE_ENTER("");
  touch_context(s);
  run_device(s, thread_state(s).device);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  FAKE_ENTER("");
  touch_context(s);
  const auto in_use = s.memory[static_cast<size_t>(thread_state(s).device)].in_use;
  *total_bytes = s.config.memory_bytes;
  *free_bytes = s.config.memory_bytes - static_cast<size_t>(in_use);
  return cudaSuccess;
}

cudaError_t cudaDeviceCanAccessPeer(int* can_access, int device, int peer) {
  FAKE_ENTER(std::to_string(device) + " -> " + std::to_string(peer));
  if (!valid_device(s, device) || !valid_device(s, peer)) return finish(s, cudaErrorInvalidDevice);
  *can_access = s.config.peer_access && device != peer ? 1 : 0;
  return cudaSuccess;
}

cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int /*flags*/) {
  FAKE_ENTER(std::to_string(peer));
  touch_context(s);
  const int device = thread_state(s).device;
  if (!valid_device(s, peer) || peer == device || !s.config.peer_access) {
    return finish(s, cudaErrorInvalidDevice);
  }
  if (!s.peer_enabled.insert(static_cast<uintptr_t>(device * 256 + peer)).second) {
    return finish(s, cudaErrorPeerAccessAlreadyEnabled);
  }
  return cudaSuccess;
}

cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** function,
                                             unsigned int /*version*/, unsigned long long /*flags*/,
                                             cudaDriverEntryPointQueryResult* status) {
  FAKE_ENTER(symbol);
  *function = nullptr;
  if (std::strcmp(symbol, "cuDeviceGet") == 0) {
    *function = reinterpret_cast<void*>(&fake_cu_device_get);
  } else if (std::strcmp(symbol, "cuDevicePrimaryCtxGetState") == 0) {
    *function = reinterpret_cast<void*>(&fake_cu_primary_ctx_get_state);
  }
  if (status != nullptr) {
    *status =
        *function != nullptr ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  }
  return cudaSuccess;
}

// --- streams

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int /*flags*/,
                                         int /*priority*/) {
  FAKE_ENTER("");
  touch_context(s);
  uintptr_t handle = 0;
  if (!s.free_stream_handles.empty()) {  // a driver may hand out a destroyed stream's handle
    handle = s.free_stream_handles.back();
    s.free_stream_handles.pop_back();
  } else {
    handle = s.next_stream_handle;
    s.next_stream_handle += 0x10;
  }
  auto created = std::make_shared<StreamState>();
  created->device = thread_state(s).device;
  created->name = numbered('S', s.all_streams.size());
  s.all_streams.push_back(created);
  s.streams[handle] = created;
  *stream = reinterpret_cast<cudaStream_t>(handle);
  s.trace.back().detail = tandem::fake_cuda::detail::describe(*created);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  FAKE_ENTER(handle_name(stream));
  const auto it = s.streams.find(reinterpret_cast<uintptr_t>(stream));
  if (it == s.streams.end()) {
    s.violations.push_back("cudaStreamDestroy of an unknown stream " + handle_name(stream));
    return finish(s, cudaErrorInvalidResourceHandle);
  }
  s.trace.back().detail = tandem::fake_cuda::detail::describe(*it->second);
  it->second->destroyed = true;  // its queued work still runs
  s.free_stream_handles.push_back(it->first);
  s.streams.erase(it);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  FAKE_ENTER(handle_name(stream));
  const auto target = stream_or_violation(s, stream);
  if (!target) return finish(s, cudaErrorInvalidResourceHandle);
  touch_context(s);
  tandem::fake_cuda::detail::run_until(*target, static_cast<int64_t>(target->items.size()));
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  FAKE_ENTER(handle_name(stream));
  const auto target = stream_or_violation(s, stream);
  if (!target) return finish(s, cudaErrorInvalidResourceHandle);
  const bool done = target->completed == static_cast<int64_t>(target->items.size());
  return done ? cudaSuccess : finish(s, cudaErrorNotReady);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int /*flags*/) {
  FAKE_ENTER(handle_name(stream));
  const auto target = stream_or_violation(s, stream);
  EventState* waited = find_event(s, event);
  if (!target || waited == nullptr) return finish(s, cudaErrorInvalidResourceHandle);
  s.trace.back().detail =
      tandem::fake_cuda::detail::describe(*target) + " waits for " + waited->name;
  touch_context(s);
  // The wait captures the event's latest record: recording it again later changes nothing.
  target->items.push_back({waited->recorded});
  return cudaSuccess;
}

// --- events

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  FAKE_ENTER("");
  touch_context(s);
  const uintptr_t handle = s.next_event_handle;
  s.next_event_handle += 0x10;
  EventState created;
  created.device = thread_state(s).device;
  created.timing = (flags & cudaEventDisableTiming) == 0;
  created.name = numbered('E', (handle - 0x9000) / 0x10);
  s.trace.back().detail = created.name + " of cuda:" + std::to_string(created.device);
  s.events.emplace(handle, std::move(created));
  *event = reinterpret_cast<cudaEvent_t>(handle);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  FAKE_ENTER(handle_name(event));
  if (find_event(s, event) == nullptr) return finish(s, cudaErrorInvalidResourceHandle);
  s.events.erase(reinterpret_cast<uintptr_t>(event));
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  FAKE_ENTER(handle_name(event));
  EventState* recorded = find_event(s, event);
  const auto target = stream_or_violation(s, stream);
  if (recorded == nullptr || !target) return finish(s, cudaErrorInvalidResourceHandle);
  s.trace.back().detail = recorded->name + " of cuda:" + std::to_string(recorded->device) + " on " +
                          tandem::fake_cuda::detail::describe(*target);
  if (recorded->device != target->device) {
    s.violations.push_back("cudaEventRecord: " + s.trace.back().detail);
    return finish(s, cudaErrorInvalidResourceHandle);
  }
  touch_context(s);
  recorded->recorded = {target, static_cast<int64_t>(target->items.size())};
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  FAKE_ENTER(handle_name(event));
  EventState* waited = find_event(s, event);
  if (waited == nullptr) return finish(s, cudaErrorInvalidResourceHandle);
  if (waited->recorded.stream) {
    tandem::fake_cuda::detail::run_until(*waited->recorded.stream, waited->recorded.count);
  }
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  FAKE_ENTER(handle_name(event));
  EventState* queried = find_event(s, event);
  if (queried == nullptr) return finish(s, cudaErrorInvalidResourceHandle);
  return tandem::fake_cuda::detail::reached(queried->recorded) ? cudaSuccess
                                                               : finish(s, cudaErrorNotReady);
}

// As the runtime: both events with timing, of one device, recorded, and passed (else
// cudaErrorNotReady). The time itself is always 1 ms.
cudaError_t cudaEventElapsedTime(float* milliseconds, cudaEvent_t start, cudaEvent_t end) {
  FAKE_ENTER(handle_name(start) + " " + handle_name(end));
  const EventState* from = find_event(s, start);
  const EventState* to = find_event(s, end);
  if (from == nullptr || to == nullptr) return finish(s, cudaErrorInvalidResourceHandle);
  if (!from->timing || !to->timing || from->device != to->device || !from->recorded.stream ||
      !to->recorded.stream) {
    s.violations.push_back("cudaEventElapsedTime: " + from->name + " and " + to->name +
                           " need timing, one device and a record each");
    return finish(s, cudaErrorInvalidResourceHandle);
  }
  using tandem::fake_cuda::detail::reached;
  if (!reached(from->recorded) || !reached(to->recorded)) return finish(s, cudaErrorNotReady);
  *milliseconds = 1.0f;
  return cudaSuccess;
}

// --- memory

cudaError_t cudaMalloc(void** ptr, size_t size) {
  FAKE_ENTER(std::to_string(size));
  touch_context(s);
  const int device = thread_state(s).device;
  auto& memory = s.memory[static_cast<size_t>(device)];
  if (static_cast<size_t>(memory.in_use) + size > s.config.memory_bytes) {
    return finish(s, cudaErrorMemoryAllocation);
  }
  const uintptr_t address = (uintptr_t{1} << 40) * static_cast<uintptr_t>(device + 1) + memory.next;
  memory.next += (size + 511) / 512 * 512 + 512;
  memory.in_use += static_cast<int64_t>(size);
  s.allocations[address] = {device, size};
  *ptr = reinterpret_cast<void*>(address);
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  FAKE_ENTER(handle_name(ptr));
  if (ptr == nullptr) return cudaSuccess;
  const auto it = s.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.allocations.end()) {
    s.violations.push_back("cudaFree of an unknown pointer " + handle_name(ptr));
    return finish(s, cudaErrorInvalidValue);
  }
  const auto [device, size] = it->second;
  if (device_busy(s, device)) {
    s.violations.push_back("cudaFree on cuda:" + std::to_string(device) +
                           " while work is still queued there");
  }
  s.memory[static_cast<size_t>(device)].in_use -= static_cast<int64_t>(size);
  s.allocations.erase(it);
  return cudaSuccess;
}

cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int /*flags*/) {
  FAKE_ENTER(std::to_string(size));
  touch_context(s);
  *ptr = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096);
  if (*ptr == nullptr) return finish(s, cudaErrorMemoryAllocation);
  s.host_allocations[*ptr] = size;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  FAKE_ENTER(handle_name(ptr));
  if (s.host_allocations.erase(ptr) == 0 && s.old_host_allocations.erase(ptr) == 0) {
    s.violations.push_back("cudaFreeHost of an unknown pointer " + handle_name(ptr));
    return finish(s, cudaErrorInvalidValue);
  }
  std::free(ptr);
  return cudaSuccess;
}

// --- copies: queued (cudaMemcpy waits for the device's work first, as a copy on the legacy
// default stream does), but they move no bytes: device memory is fake, so the host must never
// read what a copy would bring.

cudaError_t cudaMemcpyAsync(void* /*dst*/, const void* /*src*/, size_t count,
                            cudaMemcpyKind /*kind*/, cudaStream_t stream) {
  FAKE_ENTER("");
  return tandem::fake_cuda::detail::queue_kernel(s, stream, std::to_string(count) + " bytes");
}

cudaError_t cudaMemcpyPeerAsync(void* /*dst*/, int /*dst_device*/, const void* /*src*/,
                                int /*src_device*/, size_t count, cudaStream_t stream) {
  FAKE_ENTER("");
  return tandem::fake_cuda::detail::queue_kernel(s, stream, std::to_string(count) + " bytes");
}

cudaError_t cudaMemcpy(void* /*dst*/, const void* /*src*/, size_t count, cudaMemcpyKind /*kind*/) {
  FAKE_ENTER(std::to_string(count) + " bytes");
  touch_context(s);
  run_device(s, thread_state(s).device);
  return cudaSuccess;
}

}  // extern "C"
