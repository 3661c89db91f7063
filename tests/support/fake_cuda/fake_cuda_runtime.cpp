// The fake runtime's state and the tests' controls (Note [Fake CUDA runtime]).

#include "tests/support/fake_cuda/fake_cuda_runtime.h"

#include <algorithm>
#include <cstdlib>

#include "tests/support/fake_cuda/fake_cuda_state.h"

namespace tandem::fake_cuda {
namespace detail {

State& state() {
  static auto* instance = [] {
    auto* s = new State;
    s->default_streams.resize(static_cast<size_t>(s->config.device_count));
    for (int d = 0; d < s->config.device_count; ++d) {
      s->default_streams[static_cast<size_t>(d)] =
          std::make_shared<StreamState>(StreamState{.device = d, .name = "default"});
    }
    s->memory.resize(static_cast<size_t>(s->config.device_count));
    return s;
  }();
  return *instance;
}

ThreadState& thread_state(State& s) {
  thread_local ThreadState thread;
  if (thread.generation != s.generation) thread = ThreadState{.generation = s.generation};
  return thread;
}

cudaError_t enter(State& s, const char* function, const std::string& detail) {
  s.trace.push_back(Call{function, thread_state(s).device, detail});
  const auto it = s.scripted.find(std::string_view(function));
  if (it == s.scripted.end() || it->second.empty()) return cudaSuccess;
  const cudaError_t error = it->second.front();
  it->second.pop_front();
  return error;
}

cudaError_t finish(State& s, cudaError_t status) {
  if (status != cudaSuccess) thread_state(s).last_error = status;
  return status;
}

void touch_context(State& s) {
  s.contexts.insert(thread_state(s).device);
}

std::shared_ptr<StreamState> find_stream(State& s, cudaStream_t handle) {
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread) {
    return s.default_streams[static_cast<size_t>(thread_state(s).device)];
  }
  const auto it = s.streams.find(reinterpret_cast<uintptr_t>(handle));
  return it == s.streams.end() ? nullptr : it->second;
}

std::string describe(const StreamState& stream) {
  return stream.name + " of cuda:" + std::to_string(stream.device);
}

void run_until(StreamState& stream, int64_t count) {
  while (stream.completed < count) {
    const Mark& mark = stream.items[static_cast<size_t>(stream.completed)].waits_for;
    if (mark.stream) run_until(*mark.stream, mark.count);
    ++stream.completed;
  }
}

void run_every_stream(State& s) {
  for (const auto& stream : s.all_streams) {
    run_until(*stream, static_cast<int64_t>(stream->items.size()));
  }
  for (const auto& stream : s.default_streams) {
    run_until(*stream, static_cast<int64_t>(stream->items.size()));
  }
}

bool reached(const Mark& mark) {
  return !mark.stream || mark.stream->completed >= mark.count;
}

cudaError_t queue_kernel(State& s, cudaStream_t stream, const std::string& what) {
  const auto target = find_stream(s, stream);
  if (!target) {
    s.violations.push_back(what + " queued on an unknown stream");
    return finish(s, cudaErrorInvalidResourceHandle);
  }
  const int device = thread_state(s).device;
  if (target->device != device) {
    s.violations.push_back(what + " queued on " + describe(*target) +
                           " while cuda:" + std::to_string(device) + " is current");
  }
  s.trace.back().detail = what + " on " + describe(*target);
  touch_context(s);
  target->items.push_back({});
  return cudaSuccess;
}

}  // namespace detail

using detail::state;
using detail::State;

void reset(const Config& config) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  detail::run_every_stream(s);
  if (config.device_count > static_cast<int>(s.default_streams.size())) {
    for (int d = static_cast<int>(s.default_streams.size()); d < config.device_count; ++d) {
      s.default_streams.push_back(std::make_shared<detail::StreamState>(
          detail::StreamState{.device = d, .name = "default"}));
    }
    s.memory.resize(static_cast<size_t>(config.device_count));
  }
  ++s.generation;
  s.config = config;
  s.trace.clear();
  s.violations.clear();
  s.scripted.clear();
  s.contexts.clear();
  s.peer_enabled.clear();
  for (auto& memory : s.memory) memory.in_use = 0;
  for (auto& [address, allocation] : s.allocations) allocation.second = 0;  // no longer counted
  for (const auto& [ptr, size] : s.host_allocations) s.old_host_allocations.insert(ptr);
  s.host_allocations.clear();
}

std::vector<Call> calls() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.trace;
}

std::vector<Call> calls_to(std::string_view function) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  std::vector<Call> selected;
  for (const Call& call : s.trace) {
    if (call.function == function) selected.push_back(call);
  }
  return selected;
}

std::vector<std::string> violations() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.violations;
}

void fail_next(std::string_view function, cudaError_t error, int times) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto& queue = s.scripted[std::string(function)];
  for (int i = 0; i < times; ++i) queue.push_back(error);
}

std::set<int> devices_with_context() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.contexts;
}

namespace {

detail::StreamState& stream_of(State& s, cudaStream_t stream, int device) {
  if (stream == nullptr) return *s.default_streams.at(static_cast<size_t>(device));
  const auto found = detail::find_stream(s, stream);
  if (!found) std::abort();  // a test named a stream that does not exist
  return *found;
}

}  // namespace

void run(cudaStream_t stream, int device) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  detail::StreamState& target = stream_of(s, stream, device);
  detail::run_until(target, static_cast<int64_t>(target.items.size()));
}

void run_all() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  detail::run_every_stream(s);
}

int64_t queued(cudaStream_t stream, int device) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const detail::StreamState& target = stream_of(s, stream, device);
  return static_cast<int64_t>(target.items.size()) - target.completed;
}

int64_t device_bytes_in_use(int device) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.memory.at(static_cast<size_t>(device)).in_use;
}

int64_t host_bytes_in_use() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  int64_t total = 0;
  for (const auto& [ptr, size] : s.host_allocations) total += static_cast<int64_t>(size);
  return total;
}

void launch(cudaStream_t stream) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const cudaError_t scripted = detail::enter(s, "launch", "");
  if (scripted != cudaSuccess) {
    detail::finish(s, scripted);
    return;
  }
  detail::queue_kernel(s, stream, "kernel");
}

}  // namespace tandem::fake_cuda
