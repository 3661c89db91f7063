#include "parallel/zero/flat_parameters.h"

#include "engine/autograd/grad_mode.h"
#include "engine/ops/factory.h"
#include "engine/ops/layout.h"

namespace tandem::parallel {

FlatParameters::FlatParameters(std::vector<Tensor> parameters, ShardLayout layout)
    : parameters_(std::move(parameters)), layout_(std::move(layout)) {
  TANDEM_CHECK(layout_.parameter_count() == parameters_.size(), "[ZeRO] a layout of ",
               layout_.parameter_count(), " parameters for ", parameters_.size());
  NoGradGuard no_grad;
  const Device device = parameters_.empty() ? Device::cpu() : parameters_.front().device();
  for (const BucketShards& shards : layout_.buckets()) {
    Tensor buffer = zeros({shards.padded_numel}, {.device = device});
    for (size_t slot = 0; slot < shards.parameters.size(); ++slot) {
      const Tensor& p = parameters_[shards.parameters[slot]];
      TANDEM_CHECK(p.dtype() == DType::Float32 && p.device() == device && p.is_dense(),
                   "[ZeRO] parameters must be dense float32 tensors on one device");
      const int64_t offset = shards.offsets[slot];
      Tensor view =
          ops::dense_view(buffer.slice(offset, offset + p.numel()), p.shape(), p.memory_format());
      view.copy_(p);
      p.set_data(view);
    }
    buckets_.push_back(buffer);
  }
  for (const Tensor& p : parameters_) addresses_.push_back(p.data_ptr());
}

Tensor FlatParameters::shard(size_t k) const {
  const BucketShards& shards = layout_.buckets().at(k);
  return buckets_.at(k).slice(shards.shard_begin, shards.shard_begin + shards.shard_numel);
}

std::shared_ptr<Work> FlatParameters::allgather(ProcessGroup& group, size_t k) const {
  return group.allgather_into_tensor(buckets_.at(k), shard(k));
}

size_t FlatParameters::bytes() const {
  size_t total = 0;
  for (const Tensor& buffer : buckets_) total += buffer.nbytes();
  return total;
}

void FlatParameters::check_bound(const std::vector<std::string>& names) const {
  for (size_t i = 0; i < parameters_.size(); ++i) {
    TANDEM_CHECK(parameters_[i].data_ptr() == addresses_[i], "[ZeRO] parameter ",
                 i < names.size() ? names[i] : std::to_string(i),
                 " no longer lives in its flat buffer (the model was moved, or its parameters "
                 "replaced, after it was wrapped): move the model to its device and memory "
                 "format before wrapping it in DistributedDataParallel");
  }
}

}  // namespace tandem::parallel
