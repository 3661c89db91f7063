#include "parallel/zero/sharded_units.h"

#include <algorithm>

#include "engine/autograd/engine.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"

namespace tandem::parallel {

ShardedUnits::ShardedUnits(const UnitPlan& plan, std::vector<size_t> buckets,
                           const FlatParameters& flat, ProcessGroup& group)
    : flat_(flat), group_(group), units_(plan.modules.size()) {
  TANDEM_CHECK(flat_.shards_only() && buckets.size() == units_.size(),
               "[ZeRO] stage 3 needs one released bucket per unit");
  for (size_t u = 0; u < units_.size(); ++u) {
    units_[u].bucket = buckets[u];
    for (nn::Module* module : plan.modules[u]) {
      const int id = module->register_forward_pre_hook(
          [this, u](nn::Module&, const Tensor& input) { return before_forward(u, input); });
      units_[u].hooks.emplace_back(module, id);
    }
  }
}

ShardedUnits::~ShardedUnits() {
  for (Unit& unit : units_) {
    for (const auto& [module, id] : unit.hooks) module->remove_forward_pre_hook(id);
  }
}

// Note [Stage 3 units], forward. Another module of the running unit passes its input on as is.
Tensor ShardedUnits::before_forward(size_t u, const Tensor& input) {
  {
    std::lock_guard lock(mutex_);
    if (all_gathered_ || current_ == u) return input;
    if (current_ != kNoUnit) free(current_);
    wait(u);
    if (u + 1 < units_.size()) launch(u + 1);  // the prefetch
    current_ = u;
    note(UnitEvent::Kind::ForwardBegins, u);
  }
  // The first unit's input (the images) needs no gradient: its backward is the last.
  if (u == 0 || !autograd::grad_mode_enabled() || !input.requires_grad()) return input;
  return with_backward_boundary(input, u);
}

Tensor ShardedUnits::end_forward(const Tensor& output) {
  if (autograd::grad_mode_enabled() && output.requires_grad()) {
    return with_backward_boundary(output, units_.size());
  }
  std::lock_guard lock(mutex_);
  if (all_gathered_) return output;
  for (size_t u = 0; u < units_.size(); ++u) free(u);
  current_ = kNoUnit;
  return output;
}

Tensor ShardedUnits::with_backward_boundary(const Tensor& x, size_t boundary) {
  Tensor out = x.detach();  // the same data; its history is the node below
  autograd::record("ZeRO.unit_backward", {&x}, {&out},
                   [this, boundary](const std::vector<Tensor>& grads, const std::vector<bool>&) {
                     before_backward(boundary);
                     return std::vector<Tensor>{grads[0]};
                   });
  return out;
}

// Note [Stage 3 units], backward: unit `boundary` has run its backward (the model's output,
// boundary size(), has none), unit boundary - 1 runs next.
void ShardedUnits::before_backward(size_t boundary) {
  std::lock_guard lock(mutex_);
  if (all_gathered_) return;
  if (!end_queued_) {
    autograd::queue_callback([this] { end_backward(); });
    end_queued_ = true;
  }
  if (boundary < units_.size()) free(boundary);
  const size_t next = boundary - 1;
  wait(next);
  if (next >= 1) launch(next - 1);  // the prefetch
  current_ = next;
  note(UnitEvent::Kind::BackwardBegins, next);
}

void ShardedUnits::end_backward() {
  std::lock_guard lock(mutex_);
  end_queued_ = false;
  if (all_gathered_) return;
  for (size_t u = 0; u < units_.size(); ++u) free(u);
  current_ = kNoUnit;
}

// The whole model gathered is the price of reading it (a checkpoint, an evaluation), not of a
// training step: memory_peak() leaves it out.
void ShardedUnits::gather_all() {
  std::lock_guard lock(mutex_);
  const size_t step_peak = peak_bytes_;
  for (size_t u = 0; u < units_.size(); ++u) launch(u);
  for (size_t u = 0; u < units_.size(); ++u) wait(u);
  peak_bytes_ = step_peak;
  all_gathered_ = true;
}

void ShardedUnits::release_all() {
  std::lock_guard lock(mutex_);
  all_gathered_ = false;
  for (size_t u = 0; u < units_.size(); ++u) free(u);
  current_ = kNoUnit;
}

void ShardedUnits::launch(size_t u) {
  Unit& unit = units_[u];
  if (unit.gathered) return;
  unit.gather = flat_.allgather(group_, unit.bucket);
  unit.gathered = true;
  gathered_bytes_ += flat_.bucket(unit.bucket).nbytes();
  peak_bytes_ = std::max(peak_bytes_, gathered_bytes_);
  note(UnitEvent::Kind::GatherLaunched, u);
}

void ShardedUnits::wait(size_t u) {
  launch(u);
  Unit& unit = units_[u];
  if (unit.gather == nullptr) return;
  try {
    unit.gather->wait();  // NCCL: the current stream waits, not the host
  } catch (const Error& e) {
    TANDEM_FAIL("[ZeRO] all-gather of unit ", u, "'s parameters failed: ", e.message());
  }
  unit.gather.reset();
  note(UnitEvent::Kind::GatherWaited, u);
}

void ShardedUnits::free(size_t u) {
  Unit& unit = units_[u];
  if (!unit.gathered) return;
  if (unit.gather != nullptr) wait(u);  // a collective still writing into the buffer
  flat_.release(unit.bucket);
  unit.gathered = false;
  gathered_bytes_ -= flat_.bucket(unit.bucket).nbytes();
  note(UnitEvent::Kind::Freed, u);
}

void ShardedUnits::note(UnitEvent::Kind kind, size_t u) {
  if (recording_) events_.push_back({kind, u});
}

size_t ShardedUnits::memory_peak() const {
  std::lock_guard lock(mutex_);
  return peak_bytes_;
}

void ShardedUnits::record_events(bool on) {
  std::lock_guard lock(mutex_);
  recording_ = on;
  if (on) events_.clear();
}

std::vector<UnitEvent> ShardedUnits::events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

GatheredParameters::GatheredParameters(ShardedUnits* units) : units_(units) {
  if (units_ != nullptr) units_->gather_all();
}

GatheredParameters::~GatheredParameters() {
  if (units_ == nullptr) return;
  try {
    units_->release_all();
  } catch (const Error&) {
    // Only a failed all-gather still in flight throws here, and gather_all() waited for them all.
  }
}

}  // namespace tandem::parallel
