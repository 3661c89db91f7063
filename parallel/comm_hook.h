#pragma once
/// Communication hooks: how DDP's Reducer reduces a gradient bucket (PyTorch's
/// DistributedDataParallel.register_comm_hook). The Reducer hands every full bucket to its hook,
/// in launch order (Note [Launch order]); the hook starts the reduction over the process group
/// and returns a Work. Once that Work's wait() has returned, the bucket must hold the sum over
/// ranks of every rank's bucket; since each gradient was scaled by 1/world_size on its way in
/// (Note [Averaging]), that sum is the average.
///
///   ddp.register_comm_hook(make_comm_hook(GradCompression::BFloat16));  // half the bytes
///
/// Note [Gradient compression]: the fp16 and bf16 hooks cast the bucket to 16 bits, all-reduce
/// that (half the bytes of float32), and cast the sum back into the bucket when the Reducer
/// waits for it (then(), as PyTorch's fp16_compress_hook does with Future.then).
/// - bfloat16 keeps float32's exponent range and 8 significant bits: each rounding errs by at
///   most 2^-9 relative, the cast once and the sum once per addition (Gloo adds pairwise in
///   16 bits), and no gradient underflows. The safe choice.
/// - float16 has 11 significant bits (relative error 2^-12) but its normal range ends at
///   6.1e-5 and it overflows past 65504: small gradients, already divided by the world size,
///   lose bits as subnormals or flush to zero. Better precision where gradients are well scaled.
/// Both are deterministic: every rank decompresses the same 16-bit sum, so replicas stay equal.
///
/// Note [Sharded reductions]: with gradients sharded (ZeRO stage 2, parallel/zero/sharded_sgd.h)
/// the Reducer asks its hook for reduce_scatter() instead of reduce(): the same reduction, except
/// that each rank keeps only its part of the sum (Note [Shards per bucket] in shard_layout.h).
/// The built-in hooks do both, the compression hooks with the same 16-bit casts around the
/// reduce-scatter; a hook of one's own that has no reduce_scatter() is refused in one line.

#include <memory>
#include <string>

#include "engine/tensor.h"
#include "parallel/comm/process_group.h"

namespace tandem::parallel {

/// One gradient bucket, as a hook sees it.
struct GradBucket {
  size_t index = 0;   ///< position in launch order (0: the first to launch)
  Tensor buffer;      ///< the bucket's gradients back to back: float32, on the parameters' device
  bool last = false;  ///< the last bucket of the step
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  virtual std::string name() const = 0;
  /// Starts reducing `bucket.buffer` over `group`. Every rank calls it for the same buckets in
  /// the same order (Note [Collective order]). May run on an autograd worker thread.
  virtual std::shared_ptr<Work> reduce(ProcessGroup& group, const GradBucket& bucket) = 0;
  /// Note [Sharded reductions]: starts reducing `bucket.buffer` (float32, padded to a multiple
  /// of group.size() elements) so that once the Work's wait() has returned, `shard` (float32,
  /// buffer.numel() / size() elements) holds this rank's part of the sum over ranks: part r is
  /// elements [r·n, (r+1)·n). The buffer's values may be anything afterwards. The default throws.
  virtual std::shared_ptr<Work> reduce_scatter(ProcessGroup& group, const GradBucket& bucket,
                                               const Tensor& shard);
  /// Bytes this rank hands to collectives for a bucket of `elements` float32 gradients: what
  /// bench_cifar reports per step (each rank sends about twice this in a ring all-reduce).
  virtual size_t payload_bytes(int64_t elements) const = 0;
};

enum class GradCompression {
  None,      ///< float32 all-reduce (the default hook)
  Float16,   ///< IEEE half precision on the wire
  BFloat16,  ///< bfloat16 on the wire
};

/// "none", "fp16" or "bf16" (also "float16", "bfloat16"); throws naming the choices otherwise.
GradCompression parse_grad_compression(const std::string& name);
const char* grad_compression_name(GradCompression compression);

/// The hook for a compression choice: the plain all-reduce, or cast, all-reduce, cast back.
std::shared_ptr<CommHook> make_comm_hook(GradCompression compression);

}  // namespace tandem::parallel
