#include "engine/cuda/label_check.h"

#include <climits>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/cuda/runtime/cuda_check.h"
#include "engine/cuda/runtime/device.h"
#include "engine/cuda/runtime/pinned_allocator.h"
#include "engine/cuda/runtime/stream.h"

namespace tandem::cuda {
namespace {

constexpr size_t kMaxQueued = 32;

struct QueuedCheck {
  Event done;
  Tensor first_bad;  // pinned host int64 slot whose low 4 bytes receive bad_row
  Tensor labels;
  int64_t classes = 0;
};

struct BadLabel {
  Tensor labels;
  int64_t classes = 0;
  int row = 0;
};

// The checks queued on one device, oldest first.
struct DeviceChecks {
  std::mutex mutex;
  std::deque<QueuedCheck> queued;
};

DeviceChecks& checks_for(int device) {
  check_device(device, "cross_entropy");
  // Never destroyed: events must not be destroyed after the CUDA runtime at process exit.
  static auto* all = new std::vector<DeviceChecks>(static_cast<size_t>(device_count()));
  return (*all)[static_cast<size_t>(device)];
}

int first_bad_row(const QueuedCheck& check) {
  int row = 0;
  std::memcpy(&row, check.first_bad.data_ptr(), sizeof(row));
  return row;
}

// Pops finished checks, oldest first, up to and including the first that found a bad label.
std::optional<BadLabel> pop_finished(DeviceChecks& checks, bool wait) {
  std::lock_guard lock(checks.mutex);
  while (!checks.queued.empty()) {
    QueuedCheck& oldest = checks.queued.front();
    if (wait || checks.queued.size() > kMaxQueued) {
      oldest.done.synchronize();
    } else if (!oldest.done.query()) {
      return std::nullopt;
    }
    const int row = first_bad_row(oldest);
    std::optional<BadLabel> bad;
    if (row != INT_MAX) bad = BadLabel{oldest.labels, oldest.classes, row};
    checks.queued.pop_front();
    if (bad) return bad;
  }
  return std::nullopt;
}

}  // namespace

void queue_label_check(const int* bad_row, const Tensor& labels, int64_t classes,
                       cudaStream_t stream, int device) {
  QueuedCheck check{Event::pooled(device), empty_pinned({1}, DType::Int64), labels, classes};
  // Pinned destination: the copy is asynchronous and never synchronises the host.
  CUDA_CHECK(cudaMemcpyAsync(check.first_bad.data_ptr(), bad_row, sizeof(int),
                             cudaMemcpyDeviceToHost, stream));
  check.done.record(stream, device);
  DeviceChecks& checks = checks_for(device);
  std::lock_guard lock(checks.mutex);
  checks.queued.push_back(std::move(check));
}

void raise_bad_labels(int device, bool wait) {
  const std::optional<BadLabel> bad = pop_finished(checks_for(device), wait);
  if (!bad) return;
  // Only on the error path: one small synchronous read names the label.
  int64_t label = 0;
  CUDA_CHECK(cudaMemcpy(&label, bad->labels.data<int64_t>() + bad->row, sizeof(label),
                        cudaMemcpyDeviceToHost));
  TANDEM_FAIL("[cross_entropy] label ", label, " at row ", bad->row, " is outside [0, ",
              bad->classes, ")");
}

}  // namespace tandem::cuda
