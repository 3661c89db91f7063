#include "parallel/scatter_gather.h"

#include "engine/ops/concat.h"
#include "engine/profiler.h"

namespace tandem::parallel {

std::vector<int64_t> chunk_sizes(int64_t batch, int64_t devices) {
  TANDEM_CHECK(devices >= 1, "[scatter] needs at least one device");
  TANDEM_CHECK(batch >= 1, "[scatter] cannot split an empty batch over ", devices, " devices");
  const int64_t rows = (batch + devices - 1) / devices;
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < batch; start += rows)
    sizes.push_back(std::min(rows, batch - start));
  return sizes;
}

std::vector<Tensor> scatter(const Tensor& input, const std::vector<Device>& devices) {
  const profiler::RecordScope scope("DataParallel.scatter", profiler::Category::Annotation);
  TANDEM_CHECK(input.dim() >= 1, "[scatter] input needs a batch dimension, got a scalar");
  const std::vector<int64_t> sizes =
      chunk_sizes(input.size(0), static_cast<int64_t>(devices.size()));
  std::vector<Tensor> chunks;
  int64_t start = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    chunks.push_back(input.slice(start, start + sizes[i]).contiguous().to(devices[i]));
    start += sizes[i];
  }
  return chunks;
}

Tensor gather(const std::vector<Tensor>& outputs, Device device) {
  const profiler::RecordScope scope("DataParallel.gather", profiler::Category::Annotation);
  TANDEM_CHECK(!outputs.empty(), "[gather] no outputs to gather");
  std::vector<Tensor> moved;
  moved.reserve(outputs.size());
  for (const Tensor& output : outputs) {
    // A replica's scalar (a loss computed inside forward) becomes one row: PyTorch's gather
    // returns such scalars as a vector, one per replica.
    const Tensor row = output.dim() == 0 ? output.reshape({1}) : output;
    moved.push_back(row.to(device));
  }
  if (moved.size() == 1 && outputs.front().dim() > 0) return moved.front();
  return cat(moved);
}

}  // namespace tandem::parallel
