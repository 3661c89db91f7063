#pragma once
/// DataLoader: worker threads assemble and augment batches of a data set (dataset.h) ahead of
/// the consumer, as torch.utils.data.DataLoader does.
///
/// Note [Loader determinism]: batch k of epoch e holds the sampler's indices k·B … k·B + B − 1
/// for epoch e, and each image is augmented by a generator of (seed, e, the image) alone (Note
/// [Augmentation per image] in dataset.h), whichever worker builds it, so a run is
/// reproducible for any number of workers, and batches arrive strictly in order.
///
/// For a device other than cpu:0 the workers also start the batch's upload (Note [Uploads] in
/// engine/upload.h): on CUDA they build it in pinned memory and queue its copy on the loader's
/// copy stream, so up to `prefetch` batches are already on the device, or on their way, while
/// the consumer's step runs; next() makes the consumer's stream wait for the copy.

#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/sampler.h"
#include "engine/upload.h"

namespace tandem::data {

struct DataLoaderConfig {
  int64_t batch_size = 128;
  int workers = 2;         ///< 0: batches are built on the consumer's thread
  int prefetch = 4;        ///< batches built ahead of the consumer, at most
  bool drop_last = false;  ///< drop a short last batch
  uint64_t seed = 0;
  Device device = Device::cpu();  ///< where next() delivers the batch (see Note [Uploads])
  /// Of the delivered inputs (4-dimensional batches only): ChannelsLast batches are converted by
  /// the worker threads on the host path, on the device after the upload otherwise (Note [Memory
  /// formats]).
  MemoryFormat memory_format = MemoryFormat::Contiguous;
};

/// Batches of `batch_size` that `samples` indices make: the last one short, or dropped.
int64_t batch_count(int64_t samples, int64_t batch_size, bool drop_last);

class DataLoader {
 public:
  /// Batches of any data set (dataset.h; CIFAR-10's is a CifarImages, cifar10.h, which applies
  /// the transforms); `sampler` orders its indices per epoch.
  DataLoader(std::shared_ptr<const Dataset> dataset, std::shared_ptr<const Sampler> sampler,
             const DataLoaderConfig& config);
  /// Stops the workers, also in the middle of an epoch.
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Starts (or restarts) epoch `epoch` at batch `first_batch` (a resume in the middle of the
  /// epoch: the batches before it are skipped, the rest are those of the whole epoch); batches of
  /// an unfinished epoch are discarded.
  void start_epoch(int64_t epoch, int64_t first_batch = 0);
  /// The next batch of the epoch, or nothing at its end. A worker's error is re-thrown here.
  std::optional<Batch> next();
  int64_t batches_per_epoch() const;

 private:
  /// A built batch: on the host, or on its way to the device (`upload`), or the error.
  struct Slot {
    std::optional<Batch> batch;
    std::unique_ptr<PendingUpload> upload;
    std::exception_ptr error;
  };

  void worker_loop();
  /// Builds the batch of `indices` in `epoch` and starts its upload; never throws (see Slot).
  Slot build(int64_t epoch, const std::vector<int64_t>& indices) const;

  std::shared_ptr<const Dataset> dataset_;
  ExampleLayout layout_;  ///< read once: the default layout() builds an example
  std::shared_ptr<const Sampler> sampler_;
  DataLoaderConfig config_;
  std::unique_ptr<UploadStream> uploads_;  ///< null when batches stay on the host (cpu:0)

  std::mutex mutex_;  // guards everything below
  std::condition_variable work_ready_;
  std::condition_variable batch_ready_;
  int64_t epoch_ = -1;
  std::vector<std::vector<int64_t>> batch_indices_;  ///< this epoch's batches
  int64_t next_to_build_ = 0;
  int64_t next_to_deliver_ = 0;
  std::map<int64_t, Slot> ready_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace tandem::data
