#pragma once
/// The per-step results a training epoch leaves on the device until the next host sync.

#include <vector>

#include "engine/ops/concat.h"
#include "engine/tandem.h"

namespace tandem::apps {

// Note [Host syncs]: reading a GPU value on the host (item(), to_vector) waits for every kernel
// queued before it, so the GPU idles while the host queues the next step. The trainer therefore
// leaves each step's loss and correct count on the device and reads those of the last
// kHostSyncEvery steps in one copy: the progress line, the NaN check (which still names the first
// bad step) and, in ddp, the ranks' agreement to go on (Note [Stopping together]) happen then.
constexpr int64_t kHostSyncEvery = 10;

// Per-step losses and correct counts not yet read on the host.
class PendingSteps {
 public:
  struct Values {
    std::vector<double> losses;  ///< mean loss of each step, in order
    double loss_sum = 0;         ///< Σ loss × images
    double correct = 0;
    int64_t images = 0;
  };

  void add(const Tensor& mean_loss, const Tensor& correct, int64_t images) {
    tensors_.push_back(mean_loss.detach().reshape({1}));
    tensors_.push_back(correct.reshape({1}));
    images_.push_back(images);
  }
  size_t size() const { return images_.size(); }

  /// Everything added since the last read, in one device→host copy.
  Values read() {
    Values values;
    if (images_.empty()) return values;
    const std::vector<float> read = cat(tensors_).to_vector<float>();
    for (size_t i = 0; i < images_.size(); ++i) {
      const double loss = read[2 * i], images = static_cast<double>(images_[i]);
      values.losses.push_back(loss);
      values.loss_sum += loss * images;
      values.correct += read[2 * i + 1];
      values.images += images_[i];
    }
    tensors_.clear();
    images_.clear();
    return values;
  }

 private:
  std::vector<Tensor> tensors_;  ///< loss, correct, loss, correct, … (one element each)
  std::vector<int64_t> images_;
};

}  // namespace tandem::apps
