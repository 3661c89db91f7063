#include "parallel/reducer.h"

#include <algorithm>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "engine/autograd/accumulate_grad.h"
#include "engine/autograd/engine.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/device_runtime.h"
#include "engine/elapsed.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"
#include "engine/ops/layout.h"
#include "engine/profiler.h"

namespace tandem::parallel {
namespace {

bool is_view_of(const Tensor& grad, const Tensor& view) {
  return grad.defined() && grad.storage() == view.storage() && grad.offset() == view.offset();
}

// Every node reachable from the outputs' gradient functions.
std::unordered_set<const autograd::Node*> reachable_nodes(const std::vector<Tensor>& outputs) {
  std::unordered_set<const autograd::Node*> seen;
  std::vector<const autograd::Node*> stack;
  for (const Tensor& output : outputs) {
    const autograd::Edge edge = autograd::gradient_edge(output);
    if (edge.valid() && seen.insert(edge.node.get()).second) stack.push_back(edge.node.get());
  }
  while (!stack.empty()) {
    const autograd::Node* node = stack.back();
    stack.pop_back();
    for (const autograd::Edge& next : node->next_edges()) {
      if (next.valid() && seen.insert(next.node.get()).second) stack.push_back(next.node.get());
    }
  }
  return seen;
}

}  // namespace

void check_parameters_device(const ProcessGroup& group, Device parameters_device) {
  const Device wanted = group.tensor_device();
  TANDEM_CHECK(parameters_device == wanted, "[DDP] the model's parameters are on ",
               parameters_device, ", but the ", group.backend_name(),
               " process group takes tensors on ", wanted, ": move the model to ", wanted,
               wanted.is_cpu() ? " (or use the nccl backend for CUDA parameters)" : " first");
}

Reducer::Reducer(std::vector<Tensor> parameters, std::vector<std::string> names,
                 std::shared_ptr<ProcessGroup> group, ReducerOptions options,
                 std::shared_ptr<BucketStorage> storage)
    : parameters_(std::move(parameters)),
      names_(std::move(names)),
      group_(std::move(group)),
      options_(options),
      storage_(storage ? std::move(storage) : std::make_shared<DenseBuckets>()),
      timer_(group_ ? group_->backend_name() : std::string()) {
  TANDEM_CHECK(group_ != nullptr, "[DDP] no process group");
  TANDEM_CHECK(names_.size() == parameters_.size(), "[DDP] ", names_.size(), " names for ",
               parameters_.size(), " parameters");
  TANDEM_CHECK(options_.first_bucket_mb > 0 && options_.bucket_cap_mb > 0,
               "[DDP] bucket caps must be positive, got first_bucket_mb ", options_.first_bucket_mb,
               " and bucket_cap_mb ", options_.bucket_cap_mb);
  // The first bucket is the small one, so it never gets more than the others, as in PyTorch.
  options_.first_bucket_mb = std::min(options_.first_bucket_mb, options_.bucket_cap_mb);
  // A storage that keeps no gradients lays out its parts by the buckets (ZeRO).
  TANDEM_CHECK(storage_->keeps_gradients() || !options_.rebuild_buckets,
               "[DDP] a bucket storage that keeps no gradients needs the buckets fixed "
               "(rebuild_buckets = false)");
  rebuilt_ = !options_.rebuild_buckets;  // never rebuilt: as if done already
  device_ = parameters_.empty() ? group_->tensor_device() : parameters_.front().device();
  check_parameters_device(*group_, device_);
  hook_ = make_comm_hook(GradCompression::None);
  divisor_ = group_->size();
  forward_stream_ = grad_stream_ = runtime_for(device_).current_stream(device_);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& p = parameters_[i];
    TANDEM_CHECK(
        p.dtype() == DType::Float32 && p.device() == device_ && p.is_leaf() && p.requires_grad(),
        "[DDP] parameter ", names_[i], " must be a float32 leaf that requires grad, on ", device_,
        " like the others");
  }
  std::vector<size_t> reverse_registration(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i)
    reverse_registration[i] = parameters_.size() - 1 - i;
  build_buckets(reverse_registration);
  ready_.assign(parameters_.size(), false);
  used_.assign(parameters_.size(), false);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    hook_ids_.push_back(parameters_[i].register_post_accumulate_grad_hook(
        [this, i](const Tensor&) { mark_ready(i); }));
  }
}

Reducer::~Reducer() {
  for (size_t i = 0; i < hook_ids_.size(); ++i) parameters_[i].remove_hook(hook_ids_[i]);
}

void Reducer::rebuild_buckets() {
  const auto count = static_cast<int64_t>(parameters_.size());
  const std::vector<size_t> mine = rebuild_order();
  const std::vector<int64_t> order_values(mine.begin(), mine.end());
  Tensor order = from_vector(order_values, {count}, {.dtype = DType::Int64, .device = device_});
  group_->broadcast({order}, 0)->synchronize();  // the host reads it next
  std::vector<size_t> order_from_rank0;
  for (int64_t index : order.to_vector<int64_t>()) {
    TANDEM_CHECK(index >= 0 && index < count, "[DDP] rank 0 sent a bad bucket order");
    order_from_rank0.push_back(static_cast<size_t>(index));
  }
  // Gradients that are views of the old buckets move into the new ones.
  std::vector<Tensor> view_grads(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Locator& at = locators_[i];
    if (is_view_of(parameters_[i].grad(), buckets_[at.bucket].views[at.slot])) {
      view_grads[i] = parameters_[i].grad().clone();
    }
  }
  build_buckets(order_from_rank0);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!view_grads[i].defined()) continue;
    const Locator& at = locators_[i];
    Tensor view = buckets_[at.bucket].views[at.slot];
    view.copy_(view_grads[i]);
    parameters_[i].set_grad(view);
  }
  rebuilt_ = true;
  arrival_order_.clear();
}

// Note [Unfinished reduction]: a backward pass that marked gradients ready but never reached
// finalize() (it threw on this rank and the caller went on) leaves this rank's buckets a step
// behind the others'; every later all-reduce would pair different steps and still succeed. So the
// next DDP forward refuses to start, as PyTorch does ("Expected to have finished reduction in
// the prior iteration"): the job must restart, since the ranks cannot agree to skip the step.
void Reducer::prepare_for_backward(const std::vector<Tensor>& outputs) {
  std::lock_guard lock(mutex_);
  // Note [Unfinished reduction]
  TANDEM_CHECK(!require_finalize_,
               "[DDP] expected to have finished reduction in the prior "
               "iteration before starting a new one: the last backward on rank ",
               group_->rank(),
               " stopped before its gradients were all-reduced (an exception in backward, caught "
               "and skipped?), so this rank's gradient buckets are a step behind the other "
               "ranks'; restart the job (every rank must skip a failed step together)");
  if (rebuild_due()) rebuild_buckets();
  arrival_order_.clear();
  std::fill(ready_.begin(), ready_.end(), false);
  for (Bucket& bucket : buckets_) {
    bucket.pending = bucket.parameters.size();
    bucket.work.reset();
  }
  used_work_.reset();
  next_to_launch_ = 0;
  forward_stream_ =
      runtime_for(device_).current_stream(device_);  // unused parameters' buckets are zeroed on it
  expect_hooks_ = true;
  finalize_queued_ = false;
  unused_.clear();
  if (options_.find_unused_parameters) find_unused_parameters(outputs);
}

bool Reducer::rebuild_due() const {
  return !rebuilt_ && synced_steps_ > 0;
}

// Note [Unused parameters] (find_unused_parameters): DDP's forward finds the parameters its
// output does not reach, and the first gradient hook of the backward marks them ready, so a
// forward that is not followed by a backward (an evaluation in grad mode) launches nothing, as
// in PyTorch.
// An unused parameter contributes its .grad when it has one (gradients accumulated under
// no_sync()) and zero otherwise; gradient hooks record use even under no_sync(), and that record
// is cleared only by the synchronised step's finalize(). The ranks then all-reduce who used what
// (launched with the last bucket, read in finalize()): a parameter some rank used gets the
// average, one no rank used keeps its .grad.
void Reducer::find_unused_parameters(const std::vector<Tensor>& outputs) {
  const auto reached = reachable_nodes(outputs);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    // A parameter in the graph is reached through its (shared) accumulator node.
    if (!reached.contains(autograd::grad_accumulator(parameters_[i]).get())) unused_.push_back(i);
  }
}

void Reducer::mark_ready(size_t index) {
  std::lock_guard lock(mutex_);
  if (!expect_hooks_) {
    // no_sync(), or a backward pass that no DDP forward armed: nothing to reduce now, but this
    // rank holds a gradient the next synchronised step must average (Note [Unused parameters]).
    used_[index] = true;
    return;
  }
  if (!finalize_queued_) {
    autograd::queue_callback([this] { finalize(); });
    finalize_queued_ = true;
  }
  grad_stream_ =
      runtime_for(device_).current_stream(device_);  // the autograd worker's, where the copies go
  // Note [Unused parameters]: now that a backward runs, the parameters it cannot reach.
  for (size_t unused : std::exchange(unused_, {})) mark_ready_locked(unused, false);
  mark_ready_locked(index, true);
}

// Note [Averaging]: each gradient is scaled by 1/world_size on its way into the bucket and the
// bucket is summed, as PyTorch does, so the all-reduce yields the average without a second pass.
void Reducer::mark_ready_locked(size_t index, bool has_gradient) {
  TANDEM_CHECK(!ready_[index], "[DDP] parameter ", names_[index],
               " got its gradient twice in one step: backward ran twice after one forward, or "
               "the parameter is shared in a way DDP cannot follow");
  ready_[index] = true;
  require_finalize_ = true;
  if (has_gradient) used_[index] = true;
  arrival_order_.push_back(index);
  Bucket& bucket = buckets_[locators_[index].bucket];
  if (!bucket.flat.defined()) take_buffer(bucket, locators_[index].bucket);
  Tensor view = bucket.views[locators_[index].slot];
  const Tensor grad = parameters_[index].grad();
  // An unused parameter's .grad, when it has one, holds what it accumulated under no_sync()
  // (Note [Unused parameters]): it goes into the average like any gradient.
  if (grad.defined()) {
    const float scale = 1.0f / static_cast<float>(divisor_);  // Note [Averaging]
    mul_out(grad, scale, view);
    if (options_.gradient_as_bucket_view && has_gradient && !is_view_of(grad, view)) {
      parameters_[index].set_grad(view);
    }
  } else {
    view.zero_();
  }
  // The bucket holds it now; a storage that keeps no gradients keeps only its reduction.
  if (!storage_->keeps_gradients()) parameters_[index].set_grad(Tensor());
  if (--bucket.pending == 0) {
    timer_.bucket_ready(locators_[index].bucket);
    if (options_.overlap) launch_ready_buckets();
  }
}

// Note [Launch order]: every rank must submit the same all-reduces in the same order (Note
// [Collective order]), so bucket k launches only once buckets 0 … k-1 have launched, even when
// it is ready earlier.
void Reducer::launch_ready_buckets() {
  while (next_to_launch_ < buckets_.size() && buckets_[next_to_launch_].pending == 0) {
    launch(next_to_launch_++);
    if (next_to_launch_ == buckets_.size()) launch_used_counts();
  }
}

// Note [Unused parameters]: who used what, all-reduced behind the last bucket; finalize() reads
// it. Every parameter is marked by now, so used_ is final for this step.
void Reducer::launch_used_counts() {
  if (!options_.find_unused_parameters) return;
  const std::vector<float> local(used_.begin(), used_.end());
  used_counts_ = from_vector(local, {static_cast<int64_t>(local.size())}, {.device = device_});
  used_work_ = group_->allreduce({used_counts_}, ReduceOp::Sum);
}

// Note [Reducer on CUDA]: buckets live on the parameters' device, which must be the process
// group's tensor_device() (NCCL: cuda:<local rank>). Nothing blocks the host on the way:
// - mark_ready() runs on the device's autograd worker and queues the scaled copy into the bucket
//   on that thread's current stream; the bucket's all-reduce is then launched from the same
//   thread, and NCCL's stream waits for that stream before it reduces (Note [NCCL stream order]);
// - finalize() runs on the thread that called backward(): Work::wait() makes that thread's
//   current stream wait for each all-reduce (no host block, Note [Work wait and synchronize]),
//   and the copies back into .grad are queued on it behind the wait.
// Work queued by one thread and used by another (the worker's gradients in finalize(), the
// forward thread's zeroed unused buckets on the worker) is ordered with
// DeviceRuntime::wait_for() (engine/device_runtime.h), a no-op when both threads use the same
// stream, as they do by default (the legacy default stream, Note [Current stream]).
// Where the host must read a result (the used-parameter counts, the rebuilt bucket order),
// the Reducer calls Work::synchronize() first, so a failed collective throws instead of
// yielding garbage. Gloo (CPU tensors) runs the same code; there every stream step is a no-op
// and wait() blocks as it always did.
// Here: the bucket was written on the forward thread's stream (unused parameters) and the
// gradient worker's; the group orders its all-reduce after the launching thread's current
// stream, which therefore waits for both first (no-ops when they are one).
void Reducer::launch(size_t index) {
  runtime_for(device_).wait_for(forward_stream_);
  runtime_for(device_).wait_for(grad_stream_);
  Bucket& bucket = buckets_[index];
  const GradBucket handed{
      .index = index, .buffer = bucket.flat, .last = index + 1 == buckets_.size()};
  bucket.work = storage_->reduce(*hook_, *group_, handed);
  if (!storage_->keeps_gradients()) {  // the collective holds the buffer from here on
    bucket.flat = Tensor();
    bucket.views.clear();
  }
  TANDEM_CHECK(bucket.work != nullptr, "[DDP] communication hook '", hook_->name(),
               "' returned no Work for bucket ", index);
}

void Reducer::wait_for_buckets() {
  for (size_t k = 0; k < buckets_.size(); ++k) {
    try {
      buckets_[k].work->wait();  // NCCL: this thread's stream waits; the host goes on
    } catch (const Error& e) {
      TANDEM_FAIL("[DDP] all-reduce of gradient bucket ", k, " failed: ", e.message());
    }
  }
}

std::string Reducer::names_of_pending() const {
  std::string names;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!ready_[i]) names += (names.empty() ? "" : ", ") + names_[i];
  }
  return names;
}

void Reducer::finalize() {
  const profiler::RecordScope scope("DDP.finalize", profiler::Category::Annotation);
  std::lock_guard lock(mutex_);
  const Clock::time_point backward_end = Clock::now();
  if (!expect_hooks_) return;
  expect_hooks_ = false;
  TANDEM_CHECK(std::all_of(ready_.begin(), ready_.end(), [](bool ready) { return ready; }),
               "[DDP] backward ended on rank ", group_->rank(),
               " without a gradient for: ", names_of_pending(),
               ". If some parameters take no part in a step's loss, construct "
               "DDP with find_unused_parameters = true");
  launch_ready_buckets();  // with overlap off, all of them; with it on, none are left
  wait_for_buckets();
  runtime_for(device_).wait_for(grad_stream_);  // .grad tensors were last written by the worker
  storage_->end_step();
  if (storage_->keeps_gradients()) write_back();
  end_timing(backward_end);
  std::fill(used_.begin(), used_.end(), false);  // Note [Unused parameters]
  require_finalize_ = false;
  ++synced_steps_;
}

// Note [Communication hooks]: each bucket is reduced by the Reducer's CommHook (comm_hook.h):
// the plain all-reduce unless register_comm_hook() chose another, such as bf16 compression.
// The hook sees the bucket already scaled (Note [Averaging]), so it only has to sum.
void Reducer::register_comm_hook(std::shared_ptr<CommHook> hook) {
  std::lock_guard lock(mutex_);
  TANDEM_CHECK(hook != nullptr, "[DDP] register_comm_hook: no hook");
  TANDEM_CHECK(!custom_hook_, "[DDP] register_comm_hook can be called only once (a '",
               hook_->name(), "' hook is registered)");
  TANDEM_CHECK(synced_steps_ == 0 && !expect_hooks_,
               "[DDP] register_comm_hook must be called before the first backward pass");
  hook_ = std::move(hook);
  custom_hook_ = true;
}

void Reducer::set_divisor(int divisor) {
  std::lock_guard lock(mutex_);
  TANDEM_CHECK(divisor >= 1 && divisor <= group_->size(),
               "[DDP] the gradient divisor must be in "
               "[1, ",
               group_->size(), "], got ", divisor);
  divisor_ = divisor;
}

// Note [Joined ranks]: under parallel::Join a rank that has run out of data calls
// shadow_backward() once for every backward pass the other ranks still run: it launches the
// same bucket reductions (through the same hook) with zeros, and the same used-parameter
// counts, so the others' collectives are answered and nothing hangs. set_divisor() lets the
// average cover only the ranks that still train. Buckets are rebuilt (Note [Bucket ordering])
// at the first forward after one synchronised step, counted alike by ranks that train and
// ranks that shadow, so all of them rebuild in the same step.
// Here: the collectives of one backward pass, in the order finalize()'s would come on a rank
// that trains, with zero gradients. Nothing is written back to .grad
// (with gradient_as_bucket_view the .grad tensors are the buckets, and end up holding the
// others' average: harmless, a joined rank takes no optimizer step).
void Reducer::shadow_backward() {
  std::lock_guard lock(mutex_);
  TANDEM_CHECK(!require_finalize_ && !expect_hooks_,
               "[DDP] a rank joined in the middle of a step: call Join::finish() only after "
               "its last backward pass has ended");
  if (rebuild_due()) rebuild_buckets();
  forward_stream_ = grad_stream_ = runtime_for(device_).current_stream(device_);
  storage_->clear_reduced();  // a joined rank has no gradient of its own to add to
  for (size_t k = 0; k < buckets_.size(); ++k) {
    if (buckets_[k].flat.defined()) {
      buckets_[k].flat.zero_();
    } else {
      take_buffer(buckets_[k], k);  // zeros
    }
    timer_.bucket_ready(k);
    launch(k);
  }
  if (options_.find_unused_parameters) {
    used_counts_ = zeros({static_cast<int64_t>(parameters_.size())}, {.device = device_});
    used_work_ = group_->allreduce({used_counts_}, ReduceOp::Sum);
  }
  wait_for_buckets();
  if (used_work_) used_work_->synchronize();
  used_work_.reset();
  storage_->end_step();
  ++synced_steps_;
}

void Reducer::end_timing(Clock::time_point backward_end) {
  std::vector<BucketTiming> sizes;
  std::vector<std::shared_ptr<Work>> works;
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const int64_t numel = storage_->numel(k);  // padding included
    sizes.push_back({.parameters = buckets_[k].parameters.size(),
                     .bytes = static_cast<size_t>(numel) * dtype_size(DType::Float32),
                     .payload_bytes = hook_->payload_bytes(numel)});
    works.push_back(buckets_[k].work);
  }
  timer_.end_step(backward_end, std::move(sizes), std::move(works));
}

void Reducer::write_back() {
  std::vector<bool> used_anywhere(parameters_.size(), true);
  if (options_.find_unused_parameters) {
    // A parameter unused here may have been used on another rank: then it gets the average.
    try {
      used_work_->synchronize();  // the host reads the counts next
    } catch (const Error& e) {
      TANDEM_FAIL("[DDP] all-reduce of the used-parameter counts failed: ", e.message());
    }
    const std::vector<float> global = used_counts_.to_vector<float>();
    for (size_t i = 0; i < global.size(); ++i) used_anywhere[i] = global[i] > 0;
  }
  for (size_t i = 0; i < parameters_.size(); ++i) {
    if (!used_anywhere[i]) continue;  // as in PyTorch: a parameter no rank used keeps its .grad
    const Locator& at = locators_[i];
    const Tensor& view = buckets_[at.bucket].views[at.slot];
    Tensor grad = parameters_[i].grad();
    if (is_view_of(grad, view)) continue;  // gradient_as_bucket_view: already there
    if (options_.gradient_as_bucket_view) {
      parameters_[i].set_grad(view);
    } else if (grad.defined()) {
      grad.copy_(view);
    } else {
      parameters_[i].set_grad(view.clone());
    }
  }
}

}  // namespace tandem::parallel
