#include "data/data_loader.h"

#include <algorithm>

#include "engine/ops/factory.h"
#include "engine/profiler.h"
#include "engine/random.h"

namespace tandem::data {
namespace {

// Memory formats describe 4-dimensional (N, C, H, W) batches; other inputs stay as they are.
Tensor in_format(const Tensor& inputs, MemoryFormat format) {
  return inputs.dim() == 4 ? inputs.contiguous(format) : inputs;
}

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset,
                       std::shared_ptr<const Sampler> sampler, const DataLoaderConfig& config)
    : dataset_(std::move(dataset)), sampler_(std::move(sampler)), config_(config) {
  TANDEM_CHECK(dataset_ && sampler_, "[DataLoader] needs a data set and a sampler");
  TANDEM_CHECK(dataset_->size() >= 1, "[DataLoader] the data set is empty");
  layout_ = dataset_->layout();
  TANDEM_CHECK(config.batch_size >= 1 && config.workers >= 0 && config.prefetch >= 1,
               "[DataLoader] needs batch_size >= 1, workers >= 0, prefetch >= 1");
  if (config.device != Device::cpu()) uploads_ = UploadStream::create(config.device);
  for (int i = 0; i < config.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

DataLoader::~DataLoader() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

int64_t batch_count(int64_t samples, int64_t batch_size, bool drop_last) {
  return drop_last ? samples / batch_size : (samples + batch_size - 1) / batch_size;
}

int64_t DataLoader::batches_per_epoch() const {
  return batch_count(sampler_->size(), config_.batch_size, config_.drop_last);
}

void DataLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  TANDEM_CHECK(first_batch >= 0 && first_batch <= batches_per_epoch(), "[DataLoader] batch ",
               first_batch, " is outside an epoch of ", batches_per_epoch(), " batches");
  const std::vector<int64_t> order = sampler_->indices(epoch);
  std::vector<std::vector<int64_t>> batches;
  for (int64_t b = 0; b < batches_per_epoch(); ++b) {
    const auto begin = order.begin() + b * config_.batch_size;
    const auto end = order.begin() + std::min<int64_t>((b + 1) * config_.batch_size, order.size());
    batches.emplace_back(begin, end);
  }
  {
    std::lock_guard lock(mutex_);
    epoch_ = epoch;
    batch_indices_ = std::move(batches);
    next_to_build_ = first_batch;
    next_to_deliver_ = first_batch;
    ready_.clear();  // a worker still building an old batch drops it (epoch check)
  }
  work_ready_.notify_all();
}

DataLoader::Slot DataLoader::build(int64_t epoch, const std::vector<int64_t>& indices) const {
  // Note [Loader determinism], Note [Augmentation per image]
  const uint64_t augmentation_seed =
      config_.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) * 1000003ull;
  Slot slot;
  try {
    const auto count = static_cast<int64_t>(indices.size());
    if (!uploads_) {
      slot.batch = empty_batch(layout_, count);
      fill_batch(*dataset_, indices, augmentation_seed, *slot.batch);
      slot.batch->images = in_format(slot.batch->images, config_.memory_format);
      return slot;
    }
    Batch staged = empty_batch(layout_, count, [&](const Shape& shape, DType dtype) {
      return uploads_->empty_host(shape, dtype);
    });
    fill_batch(*dataset_, indices, augmentation_seed, staged);
    slot.upload = uploads_->upload({staged.images, staged.labels});
  } catch (...) {
    slot.error = std::current_exception();
  }
  return slot;
}

void DataLoader::worker_loop() {
  profiler::set_thread_name("loader");
  std::unique_lock lock(mutex_);
  while (true) {
    work_ready_.wait(lock, [this] {
      return stopping_ || (next_to_build_ < static_cast<int64_t>(batch_indices_.size()) &&
                           next_to_build_ < next_to_deliver_ + config_.prefetch);
    });
    if (stopping_) return;
    const int64_t epoch = epoch_;
    const int64_t number = next_to_build_++;
    const std::vector<int64_t> indices = batch_indices_[static_cast<size_t>(number)];
    lock.unlock();
    Slot slot = build(epoch, indices);
    lock.lock();
    if (epoch == epoch_ && number >= next_to_deliver_) {
      ready_[number] = std::move(slot);
      batch_ready_.notify_all();
    }
  }
}

std::optional<Batch> DataLoader::next() {
  const profiler::RecordScope scope("DataLoader.next", profiler::Category::Annotation);
  std::unique_lock lock(mutex_);
  TANDEM_CHECK(epoch_ >= 0, "[DataLoader] call start_epoch() before next()");
  if (next_to_deliver_ >= static_cast<int64_t>(batch_indices_.size())) return std::nullopt;
  const int64_t number = next_to_deliver_;
  Slot slot;
  if (workers_.empty()) {
    lock.unlock();
    slot = build(epoch_, batch_indices_[static_cast<size_t>(number)]);
    lock.lock();
  } else {
    batch_ready_.wait(lock, [&] { return ready_.count(number) > 0; });
    slot = std::move(ready_.at(number));
    ready_.erase(number);
  }
  ++next_to_deliver_;
  lock.unlock();
  work_ready_.notify_all();  // room for one more prefetched batch
  if (slot.error) std::rethrow_exception(slot.error);
  if (!slot.upload) return std::move(*slot.batch);
  std::vector<Tensor> on_device = slot.upload->wait();
  return Batch{in_format(on_device[0], config_.memory_format), std::move(on_device[1])};
}

}  // namespace tandem::data
