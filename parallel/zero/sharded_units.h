#pragma once
/// ShardedUnits: ZeRO stage 3's schedule (Sharding::Parameters), which gathers each unit's
/// parameters just before the unit runs, forward and backward, prefetches the next unit, and
/// frees what has run. DistributedDataParallel builds it; nothing else calls it but
/// GatheredParameters.
///
/// Note [Stage 3 units]: between uses a rank holds only its part of each unit's parameters
/// (FlatParameters with shards_only; the units and their modules: Note [Units by children] in
/// unit_plan.h). A unit is one bucket of the Reducer (ReducerOptions::buckets, the last unit
/// first, since backward runs the units in reverse), so its gradients reduce-scatter as stage
/// 2's do, as soon as its backward has produced them all (Note [Sharded gradients]), and the
/// ShardedSgd steps the parts. The schedule, as PyTorch's FSDP runs it:
/// - forward: a pre-hook on each of the unit's modules (Module::operator()); the first to fire in
///   a pass waits for the unit's all-gather (launching it, unless it was prefetched), launches
///   the next unit's (the prefetch, in flight while this unit computes) and frees the unit
///   before, whose forward is over. The last unit stays gathered into backward, which starts
///   with it (FSDP2 leaves its root unit so too); a forward without grad frees it at the end;
/// - backward: the pre-hook passes the unit's input on through an identity node of autograd
///   (`ZeRO.unit_backward`) whose backward runs once the gradient of that input is complete, so
///   when the unit's backward has ended and the unit before is next: it frees the unit, waits
///   for the unit before (prefetched there), and prefetches the one before that. DDP's forward
///   puts the same node on the model's output, which starts the last unit's backward (the
///   prefetch of the unit before it). The end of backward (autograd::queue_callback) frees what
///   is still gathered: the first unit.
/// Freeing releases the buffer's storage in place (Note [Released storage] in
/// engine/storage.h), so the tensors autograd saved for backward see the unit gathered again.
/// The units must run in their order, each once per forward, as the blocks of a chain do (a
/// ResNet's): a model that interleaves or reuses them reads a released parameter and gets that
/// error. Every rank runs the same graph, so every rank launches the same all-gathers and
/// reduce-scatters in the same order (Note [Collective order] in process_group.h). At most two
/// units are gathered at once (the running one and the prefetched one); memory_peak() counts them.
///
/// Not sharded: buffers (batch-norm statistics: every rank keeps its own, as in DDP) and frozen
/// parameters, which stay whole on every rank.

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "parallel/comm/process_group.h"
#include "parallel/zero/flat_parameters.h"
#include "parallel/zero/unit_plan.h"

namespace tandem::parallel {

/// One step of the schedule, as ShardedUnits::events() records it (for tests).
struct UnitEvent {
  enum class Kind {
    GatherLaunched,  ///< the unit's all-gather was started
    GatherWaited,    ///< ... and waited for: its parameters can be read
    ForwardBegins,   ///< the unit's forward is about to run
    BackwardBegins,  ///< the unit's backward is about to run
    Freed,           ///< the unit's gathered parameters were released
  };
  Kind kind;
  size_t unit;
  bool operator==(const UnitEvent&) const = default;
};

class ShardedUnits {
 public:
  /// plan: the units (their modules get forward pre-hooks, removed by the destructor);
  /// buckets[u]: unit u's bucket in `flat` (shards_only). `flat` and `group` outlive this.
  ShardedUnits(const UnitPlan& plan, std::vector<size_t> buckets, const FlatParameters& flat,
               ProcessGroup& group);
  ~ShardedUnits();
  ShardedUnits(const ShardedUnits&) = delete;
  ShardedUnits& operator=(const ShardedUnits&) = delete;

  size_t size() const { return units_.size(); }
  /// DDP's forward, on its output: in grad mode the output that starts backward with the last
  /// unit (Note [Stage 3 units]); without grad every unit is freed and `output` returned.
  Tensor end_forward(const Tensor& output);
  /// Gathers every unit and keeps them until release_all() (GatheredParameters); a collective.
  void gather_all();
  void release_all();

  /// Bytes of gathered units alive at once, at most so far (Note [Counted memory]).
  size_t memory_peak() const;
  /// Starts (true) or stops recording events(); starting clears them.
  void record_events(bool on);
  std::vector<UnitEvent> events() const;

 private:
  struct Unit {
    std::vector<std::pair<nn::Module*, int>> hooks;  ///< module, forward pre-hook id
    size_t bucket = 0;                               ///< in flat_
    bool gathered = false;                           ///< its buffer is allocated
    std::shared_ptr<Work> gather;                    ///< its all-gather, until waited for
  };
  static constexpr size_t kNoUnit = static_cast<size_t>(-1);

  Tensor before_forward(size_t u, const Tensor& input);
  void before_backward(size_t boundary);
  void end_backward();
  /// Input `x` of unit `boundary` (or the model's output: size()) passed on through the node
  /// whose backward calls before_backward(boundary).
  Tensor with_backward_boundary(const Tensor& x, size_t boundary);
  // With mutex_ held:
  void launch(size_t u);
  void wait(size_t u);
  void free(size_t u);
  void note(UnitEvent::Kind kind, size_t u);

  const FlatParameters& flat_;
  ProcessGroup& group_;
  std::vector<Unit> units_;

  mutable std::mutex mutex_;   // guards what follows: hooks fire on the backward thread
  size_t current_ = kNoUnit;   ///< the unit that runs now, forward or backward
  bool all_gathered_ = false;  ///< gather_all() holds every unit
  bool end_queued_ = false;    ///< end_backward() is queued for this backward pass
  size_t gathered_bytes_ = 0;
  size_t peak_bytes_ = 0;
  bool recording_ = false;
  std::vector<UnitEvent> events_;
};

/// Every unit's parameters gathered while alive (PyTorch's FSDP summon_full_params): what
/// reading the whole model needs at stage 3, such as saving a checkpoint or evaluating the
/// network directly. Made and ended alike on every rank (its making is a collective). Empty (no
/// units) it does nothing: the parameters of the other stages are whole anyway.
class GatheredParameters {
 public:
  GatheredParameters() = default;
  explicit GatheredParameters(ShardedUnits* units);
  ~GatheredParameters();
  GatheredParameters(GatheredParameters&& other) noexcept
      : units_(std::exchange(other.units_, nullptr)) {}
  GatheredParameters& operator=(GatheredParameters&&) = delete;
  GatheredParameters(const GatheredParameters&) = delete;
  GatheredParameters& operator=(const GatheredParameters&) = delete;

 private:
  ShardedUnits* units_ = nullptr;
};

}  // namespace tandem::parallel
