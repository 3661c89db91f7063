#pragma once
// The fake runtime's state (Note [Fake CUDA runtime] in fake_cuda_runtime.h), shared by the test
// controls (fake_cuda_runtime.cpp) and the libcudart functions (fake_cuda_api.cpp). Everything is
// guarded by State::mutex; the helpers below expect it held.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "tests/support/fake_cuda/fake_cuda_runtime.h"

namespace tandem::fake_cuda::detail {

struct StreamState;

/// A point in a stream's work: reached once `stream` has completed `count` items.
struct Mark {
  std::shared_ptr<StreamState> stream;
  int64_t count = 0;
};

/// One queued item: a kernel (no stream in the mark) or a wait for an event (its mark).
struct Item {
  Mark waits_for;
};

struct StreamState {
  int device = 0;
  std::string name;              ///< "S3" or "default"
  std::vector<Item> items = {};  ///< every item ever queued
  int64_t completed = 0;         ///< items[0, completed) have run
  bool destroyed = false;
};

struct EventState {
  int device = 0;
  std::string name;    ///< "E5"
  Mark recorded = {};  ///< no stream: never recorded (complete)
  bool timing = true;  ///< created without cudaEventDisableTiming
};

struct DeviceMemory {
  uintptr_t next = 0;  ///< bump pointer: addresses are never reused
  int64_t in_use = 0;
};

struct ThreadState {
  uint64_t generation = 0;
  int device = 0;
  cudaError_t last_error = cudaSuccess;
};

struct State {
  std::mutex mutex;
  uint64_t generation = 1;
  Config config;
  std::vector<Call> trace;
  std::vector<std::string> violations;
  std::map<std::string, std::deque<cudaError_t>, std::less<>> scripted;
  std::set<int> contexts;
  std::vector<std::shared_ptr<StreamState>> default_streams;            ///< per device
  std::unordered_map<uintptr_t, std::shared_ptr<StreamState>> streams;  ///< live, by handle
  std::vector<std::shared_ptr<StreamState>> all_streams;  ///< destroyed ones too (their work runs)
  std::vector<uintptr_t> free_stream_handles;             ///< of destroyed streams, reused first
  uintptr_t next_stream_handle = 0x5000;
  std::unordered_map<uintptr_t, EventState> events;
  uintptr_t next_event_handle = 0x9000;
  std::vector<DeviceMemory> memory;                         ///< per device
  std::map<uintptr_t, std::pair<int, size_t>> allocations;  ///< address → (device, size)
  std::map<void*, size_t> host_allocations;                 ///< made since reset()
  std::set<void*> old_host_allocations;                     ///< made before reset()
  std::set<uintptr_t> peer_enabled;                         ///< device * 256 + peer
};

/// The process's fake runtime (never destroyed: tests free memory during static destruction).
State& state();
/// The calling thread's device and last error (reset lazily after reset()).
ThreadState& thread_state(State& s);

/// Records a call and returns the scripted error for it, if any (cudaSuccess otherwise).
cudaError_t enter(State& s, const char* function, const std::string& detail);
/// Sets the thread's last error when `status` is one; returns it.
cudaError_t finish(State& s, cudaError_t status);
/// The current device gets a primary context (the call needs one).
void touch_context(State& s);
/// The stream a handle names for the calling thread (nullptr, cudaStreamLegacy and
/// cudaStreamPerThread: the current device's default stream); nullptr for an unknown handle.
std::shared_ptr<StreamState> find_stream(State& s, cudaStream_t handle);
std::string describe(const StreamState& stream);
/// Runs `stream` until it has completed `count` items (everything it waits for runs first).
void run_until(StreamState& stream, int64_t count);
/// Runs every stream, created and default, to the end of its queue (the caller holds s.mutex).
void run_every_stream(State& s);
bool reached(const Mark& mark);
/// Queues one kernel's work on `stream` for the call just entered, whose detail becomes "`what`
/// on S2 of cuda:0"; an unknown stream, or one of a device that is not current, is a violation.
cudaError_t queue_kernel(State& s, cudaStream_t stream, const std::string& what);

}  // namespace tandem::fake_cuda::detail
