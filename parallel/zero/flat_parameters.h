#pragma once
/// FlatParameters: a model's parameters moved into one flat buffer per DDP bucket, laid out as
/// ShardLayout says (Note [Shards per bucket] in shard_layout.h), so that after each rank has
/// stepped its part of a bucket, one allgather_into_tensor puts the whole bucket back on every
/// rank, in place. Each parameter becomes a view of its bucket's buffer (PyTorch's
/// `param.data = flat[...]`, as FSDP's flat parameters do): the model trains as before and
/// holds no second copy. Moving the model afterwards (Module::to) gives the parameters other
/// memory; check_bound() then says so in one line.
///
/// With shards_only (ZeRO stage 3, Note [Stage 3 units] in sharded_units.h) each rank keeps its
/// part of a bucket in memory of its own, and the bucket's buffer is released (Note [Released
/// storage] in engine/storage.h): allgather() brings it back for a use, release() frees it
/// after. The parameters stay views of the buffers throughout, so nothing else changes.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "parallel/comm/process_group.h"
#include "parallel/zero/shard_layout.h"

namespace tandem::parallel {

class FlatParameters {
 public:
  /// parameters[i] (float32, dense, all on one device) moves into its bucket's buffer at
  /// layout.offset_of(i), keeping its values, shape and memory format; the padding is zeros.
  /// shards_only: the buffers are released after this rank's parts are copied out.
  FlatParameters(std::vector<Tensor> parameters, ShardLayout layout, bool shards_only = false);

  const ShardLayout& layout() const { return layout_; }
  const std::vector<Tensor>& parameters() const { return parameters_; }
  /// Bucket k's flat buffer, padding included.
  const Tensor& bucket(size_t k) const { return buckets_.at(k); }
  /// This rank's part of bucket k: a view of its buffer, or (shards_only) its own memory.
  Tensor shard(size_t k) const;
  bool shards_only() const { return shards_only_; }
  /// Starts gathering every rank's part of bucket k into its buffer (a collective), in place or
  /// (shards_only) into the buffer restored first.
  std::shared_ptr<Work> allgather(ProcessGroup& group, size_t k) const;
  /// shards_only: frees bucket k's buffer; its parameters cannot be read until allgather().
  void release(size_t k) const;
  /// Bytes kept between uses, padding included: the buffers, or (shards_only) the parts.
  size_t bytes() const;
  /// Throws "[ZeRO] parameter <name> no longer lives in its flat buffer ..." for the first
  /// parameter that was given other memory since. `names` as the parameters.
  void check_bound(const std::vector<std::string>& names) const;

 private:
  std::vector<Tensor> parameters_;
  ShardLayout layout_;
  std::vector<Tensor> buckets_;
  std::vector<Tensor> shards_;  ///< shards_only: this rank's parts, in memory of their own
  bool shards_only_ = false;
  /// Where each parameter's data must stay: its bucket's storage, at this offset.
  std::vector<std::pair<const Storage*, int64_t>> homes_;
};

}  // namespace tandem::parallel
