#pragma once
/// Reducer: averages DDP's gradients across ranks in buckets whose all-reduces run while backward
/// is still going. Its lifecycle, once per training step:
///
///   prepare_for_backward(outputs)  DDP's forward: arm the hooks (and find unused parameters)
///   mark_ready(i)                  gradient hook of parameter i: copy it into its bucket; a bucket
///                                  whose gradients are all in launches its all-reduce
///   finalize()                     end of backward (an autograd callback): wait for every bucket,
///                                  write the averages back
///   rebuild_buckets()              once, at the second step's forward: buckets in arrival order
///
/// Note [Bucket ordering]: parameters go into buckets in reverse registration order, since
/// backward produces gradients roughly in the reverse of the forward, which follows registration.
/// The first bucket is small (first_bucket_mb) so the first all-reduce starts early, later ones
/// hold up to bucket_cap_mb. After the first step the buckets are rebuilt once in the order the
/// gradients actually arrived on rank 0, broadcast so that every rank builds the same buckets.
///
/// The other notes sit above the code they explain: [Launch order], [Averaging] and [Unused
/// parameters] above mark_ready_locked() and its neighbours, [Unfinished reduction] above
/// prepare_for_backward(), [Communication hooks] above register_comm_hook(), [Joined ranks] above
/// shadow_backward(), [Reducer on CUDA] above launch() (reducer.cpp); [Bucket order on resume]
/// above bucket_order() (reducer_buckets.cpp). The buffers and their reduction are a
/// BucketStorage's (bucket_storage.h; ZeRO stage 2's in parallel/zero/sharded_buckets.h), the
/// step's timings a ReducerTimer's (reducer_timer.h).

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/device_runtime.h"
#include "engine/tensor.h"
#include "parallel/bucket_storage.h"
#include "parallel/comm/process_group.h"
#include "parallel/comm_hook.h"
#include "parallel/reducer_timer.h"

namespace tandem::parallel {

struct ReducerOptions {
  /// Cap of bucket 0 (Note [Bucket ordering]); the Reducer lowers it to bucket_cap_mb when that
  /// is smaller, as PyTorch does.
  double first_bucket_mb = 1.0;
  double bucket_cap_mb = 25.0;  ///< cap of every later bucket
  /// Parameters that get no gradient in a step (unreachable from the outputs) are marked ready at
  /// the start of backward with a zero contribution, instead of stalling every bucket after them.
  bool find_unused_parameters = false;
  /// Gradients become views into the buckets: no copy back after the all-reduce, less memory.
  bool gradient_as_bucket_view = false;
  /// false: buckets launch only after backward has ended, one after another; for measuring what
  /// the overlap is worth (bucket sizes stay the same).
  bool overlap = true;
  /// false: the buckets stay as built at construction, in reverse registration order, instead of
  /// being rebuilt in arrival order after the first step (sharded data parallel lays its shards
  /// out by them).
  bool rebuild_buckets = true;
};

/// Buckets (lists of indices into `bytes`) for parameters taken in `order`: a bucket closes when
/// adding the next parameter would exceed its cap; a parameter larger than the cap gets a bucket
/// of its own. Bucket 0's cap is first_cap_bytes, the others' cap_bytes.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<size_t>& order,
                                                const std::vector<size_t>& bytes,
                                                size_t first_cap_bytes, size_t cap_bytes);

/// Throws "[DDP] the model's parameters are on cpu, but the nccl process group takes tensors on
/// cuda:1 ..." unless `parameters_device` is the group's tensor_device().
void check_parameters_device(const ProcessGroup& group, Device parameters_device);

class Reducer {
 public:
  /// parameters: the model's parameters in registration order (float32, on the group's
  /// tensor_device()), all ranks alike; names are for messages. `storage` holds the buckets and
  /// starts their reductions (bucket_storage.h); null: DenseBuckets, plain DDP's.
  Reducer(std::vector<Tensor> parameters, std::vector<std::string> names,
          std::shared_ptr<ProcessGroup> group, ReducerOptions options,
          std::shared_ptr<BucketStorage> storage = nullptr);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  /// Arms the hooks for the backward pass of `outputs`. Called by DDP's forward in grad mode.
  void prepare_for_backward(const std::vector<Tensor>& outputs);
  /// The gradient of parameter `index` has been accumulated (runs on the backward thread).
  void mark_ready(size_t index);
  /// Waits for every bucket and writes the averaged gradients back (end of backward).
  void finalize();

  /// Reduces every later bucket with `hook` instead of the plain all-reduce (Note
  /// [Communication hooks]). Once per Reducer, before the first backward, the same on every
  /// rank.
  void register_comm_hook(std::shared_ptr<CommHook> hook);
  /// Gradients are averaged over `divisor` ranks from the next backward on (default: the world
  /// size). Join sets the number of ranks still training (Note [Joined ranks]).
  void set_divisor(int divisor);
  /// A joined rank's part in one backward pass of the others (Note [Joined ranks]).
  void shadow_backward();

  /// The parameter indices of each bucket, in bucket (= launch) order.
  std::vector<std::vector<size_t>> bucket_assignment() const;
  /// The parameters in the order of the buckets the next step reduces with (Note [Bucket order
  /// on resume]): the rebuilt buckets', or, while the rebuild is due at the next forward, the
  /// order it will build from (this rank's arrival order; rank 0's is the one every rank takes);
  /// empty before the first step, whose initial buckets every Reducer builds alike, and empty
  /// without rebuild_buckets (ZeRO), whose buckets never change.
  std::vector<size_t> bucket_order() const;
  /// Builds the buckets from `order` (a bucket_order() of the run a checkpoint comes from) and
  /// skips the rebuild after the first step. Every rank alike, before the first backward pass.
  /// Without rebuild_buckets it does nothing: those buckets (and ZeRO's shards) never change.
  void restore_bucket_order(const std::vector<size_t>& order);
  /// The timings of the steps (bench_cifar's overlap columns).
  const ReducerTimer& timer() const { return timer_; }

 private:
  using Clock = std::chrono::steady_clock;

  struct Bucket {
    /// The bucket's gradients back to back, reduced in one call: storage_'s buffer, held from
    /// the bucket's first gradient (or for good, when the storage keeps gradients).
    Tensor flat;
    std::vector<size_t> parameters;  ///< indices into parameters_, in bucket order
    std::vector<Tensor> views;       ///< views of `flat`, one per parameter, their shapes
    size_t pending = 0;              ///< gradients still to arrive this step
    std::shared_ptr<Work> work;      ///< this step's all-reduce, once launched
  };

  /// Where parameter i's gradient lives.
  struct Locator {
    size_t bucket = 0;
    size_t slot = 0;  ///< index in the bucket's parameters and views
  };

  void build_buckets(const std::vector<size_t>& order);
  void take_buffer(Bucket& bucket, size_t index);  ///< `flat` from storage_, and its views
  void make_views(Bucket& bucket) const;           ///< views of `flat` per parameter
  void rebuild_buckets();
  /// What rebuild_buckets() sends from rank 0: the last step's arrival order when it saw every
  /// parameter, else the current buckets' order.
  std::vector<size_t> rebuild_order() const;
  std::vector<size_t> current_order() const;  ///< the parameters, bucket after bucket
  void find_unused_parameters(const std::vector<Tensor>& outputs);
  void launch_used_counts();
  void mark_ready_locked(size_t index, bool has_gradient);
  void launch_ready_buckets();
  void write_back();
  void launch(size_t index);
  void wait_for_buckets();
  bool rebuild_due() const;

  void end_timing(Clock::time_point backward_end);  ///< the step's record, to timer_
  std::string names_of_pending() const;

  std::vector<Tensor> parameters_;
  std::vector<std::string> names_;
  std::shared_ptr<ProcessGroup> group_;
  ReducerOptions options_;
  Device device_ = Device::cpu();           ///< the parameters' (and the buckets') device
  std::shared_ptr<BucketStorage> storage_;  ///< the buckets' buffers, their reductions
  std::shared_ptr<CommHook> hook_;          ///< reduces each bucket (Note [Communication hooks])
  bool custom_hook_ = false;                ///< register_comm_hook() was called
  std::vector<int> hook_ids_;

  mutable std::mutex mutex_;  // guards everything below (hooks run on the backward thread)
  std::vector<Bucket> buckets_;
  std::vector<Locator> locators_;
  bool expect_hooks_ = false;     ///< a DDP forward armed this backward pass
  bool finalize_queued_ = false;  ///< finalize() is queued for the end of this pass
  /// Something was marked ready since the last finalize() (Note [Unfinished reduction]).
  bool require_finalize_ = false;
  std::vector<bool> ready_;  ///< per parameter: marked ready this step
  /// Per parameter: got a gradient on this rank since the last synchronised step, no_sync()
  /// passes included (Note [Unused parameters]).
  std::vector<bool> used_;
  /// find_unused_parameters: what the forward did not reach, marked ready at the first gradient
  /// hook of the backward pass, not before (Note [Unused parameters]).
  std::vector<size_t> unused_;
  Tensor used_counts_;                 ///< ranks that used each parameter, being all-reduced
  std::shared_ptr<Work> used_work_;    ///< that all-reduce, launched with the last bucket
  size_t next_to_launch_ = 0;          ///< Note [Launch order]
  std::vector<size_t> arrival_order_;  ///< first step: the order gradients arrived in
  bool rebuilt_ = false;               ///< buckets already rebuilt from arrival_order_
  int64_t synced_steps_ = 0;           ///< finalized or shadowed steps (Note [Joined ranks])
  int divisor_ = 1;                    ///< ranks the gradients are averaged over
  StreamRef forward_stream_;           ///< prepare_for_backward()'s stream (Note [Reducer on CUDA])
  StreamRef grad_stream_;              ///< the stream the gradient hooks ran on this step
  ReducerTimer timer_;
};

}  // namespace tandem::parallel
