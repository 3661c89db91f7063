#pragma once
/// FlatParameters: a model's parameters moved into one flat buffer per DDP bucket, laid out as
/// ShardLayout says (Note [Shards per bucket] in shard_layout.h), so that after each rank has
/// stepped its part of a bucket, one allgather_into_tensor puts the whole bucket back on every
/// rank, in place. Each parameter becomes a view of its bucket's buffer (PyTorch's
/// `param.data = flat[...]`, as FSDP's flat parameters do): the model trains as before and
/// holds no second copy. Moving the model afterwards (Module::to) gives the parameters other
/// memory; check_bound() then says so in one line.

#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "parallel/comm/process_group.h"
#include "parallel/zero/shard_layout.h"

namespace tandem::parallel {

class FlatParameters {
 public:
  /// parameters[i] (float32, dense, all on one device) moves into its bucket's buffer at
  /// layout.offset_of(i), keeping its values, shape and memory format; the padding is zeros.
  FlatParameters(std::vector<Tensor> parameters, ShardLayout layout);

  const ShardLayout& layout() const { return layout_; }
  const std::vector<Tensor>& parameters() const { return parameters_; }
  /// Bucket k's flat buffer, padding included.
  const Tensor& bucket(size_t k) const { return buckets_.at(k); }
  /// This rank's part of bucket k: a view of its buffer.
  Tensor shard(size_t k) const;
  /// Starts gathering every rank's part of bucket k into its buffer, in place (a collective).
  std::shared_ptr<Work> allgather(ProcessGroup& group, size_t k) const;
  /// Bytes of the buffers, padding included: the parameters' memory.
  size_t bytes() const;
  /// Throws "[ZeRO] parameter <name> no longer lives in its flat buffer ..." for the first
  /// parameter that was given other memory since. `names` as the parameters.
  void check_bound(const std::vector<std::string>& names) const;

 private:
  std::vector<Tensor> parameters_;
  ShardLayout layout_;
  std::vector<Tensor> buckets_;
  std::vector<const void*> addresses_;  ///< where each parameter's data must stay
};

}  // namespace tandem::parallel
