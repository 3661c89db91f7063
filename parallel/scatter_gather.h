#pragma once
/// Splitting a batch over devices and joining the results: the first and last steps of
/// DataParallel. Both are differentiable, so a loss on the gathered output trains the replicas.

#include <vector>

#include "engine/tensor.h"

namespace tandem::parallel {

/// Rows per device when `batch` rows are split over `devices` devices, with torch.chunk's rule
/// (what nn.DataParallel does): chunks of ceil(batch / devices) rows, the last one shorter, and
/// fewer chunks when the batch runs out: 30 over 8 is 4,4,4,4,4,4,4,2; 9 over 4 is 3,3,3; 2 over
/// 4 is 1,1.
std::vector<int64_t> chunk_sizes(int64_t batch, int64_t devices);

/// Splits input along dim 0 (chunk_sizes) and moves chunk i to devices[i]. Returns one tensor per
/// chunk, possibly fewer than devices.
std::vector<Tensor> scatter(const Tensor& input, const std::vector<Device>& devices);

/// Moves every tensor to `device` and concatenates them along dim 0; 0-dim outputs (a loss per
/// replica) become one element each, as PyTorch gathers them.
Tensor gather(const std::vector<Tensor>& outputs, Device device);

}  // namespace tandem::parallel
