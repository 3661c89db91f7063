#pragma once
/// Replicas of a module on several devices, tied to the master module through autograd.
///
/// Note [Persistent replicas]: PyTorch's nn.DataParallel calls replicate() on every forward: it
/// broadcasts the parameters into new tensors and shallow-copies every module. Here the replicas
/// are built once and refreshed in place each step: parameters are copied from the master into
/// the replica's existing storage (or aliased, on the master's own device), buffers likewise.
/// Layers keep their tensor handles, so each step rebinds the replica parameters to new autograd
/// nodes (autograd::set_history) instead of building new modules. `persistent = false` rebuilds
/// them every step, as PyTorch does, so the two can be measured against each other.
///
/// Note [Replica gradients]: replica r's parameter i is output r of a ReduceAddNode whose one
/// edge leads to master parameter i. Backward delivers every replica's gradient to that node,
/// which runs once all of them are in and sums them in replica order onto the master's device,
/// so the master's .grad is the whole batch's gradient and does not depend on thread timing.
///
/// Note [Replica buffers]: as in PyTorch, replica 0's buffers are the master's own tensors, so the
/// batch-norm running statistics of replica 0's shard land in the master; other replicas update
/// copies that the next refresh overwrites. In training mode the master therefore tracks the
/// statistics of the first shard only, exactly what nn.DataParallel leaves behind.
///
/// The master's parameters and buffers are those it had when the replicas were built (as with
/// DistributedDataParallel, here and in PyTorch): the handles are kept, so values, devices and
/// set_data() replacements are followed each step, but a parameter registered later is not.

#include <atomic>
#include <memory>
#include <vector>

#include "engine/autograd/node.h"
#include "nn/module.h"

namespace tandem::parallel {

/// Backward of broadcasting one master parameter to `replicas` replicas (Note [Replica gradients]).
class ReduceAddNode final : public autograd::Node {
 public:
  /// reduce_ns: where the time spent reducing is added up (may be null).
  ReduceAddNode(const Tensor& master_parameter, uint32_t replicas,
                std::shared_ptr<std::atomic<int64_t>> reduce_ns);
  std::vector<Tensor> apply(std::vector<Tensor>& grad_outputs) override;
  std::string name() const override { return "ReduceAdd"; }
  uint32_t num_outputs() const override { return replicas_; }

 private:
  uint32_t replicas_;
  std::shared_ptr<std::atomic<int64_t>> reduce_ns_;
};

class Replicas {
 public:
  /// The master must live on devices[0] (checked by prepare()); one replica per device entry.
  Replicas(std::shared_ptr<nn::Module> master, std::vector<Device> devices, bool persistent);

  /// Makes replicas 0 … count-1 equal to the master (values, buffers, training mode) and, in grad
  /// mode, ties their parameters to the master's for this step's backward. Returns them.
  std::vector<std::shared_ptr<nn::Module>> prepare(size_t count);

  /// Nanoseconds spent in the ReduceAddNodes of backward passes since the last reset.
  int64_t reduce_ns() const { return reduce_ns_->load(); }
  void reset_reduce_ns() { reduce_ns_->store(0); }

 private:
  void build();
  void check_master_on_first_device() const;
  void refresh(size_t count);
  void tie(size_t count);

  std::shared_ptr<nn::Module> master_;
  std::vector<Device> devices_;
  bool persistent_;
  std::vector<Tensor> master_parameters_;  ///< master_->parameters() when the replicas were built
  std::vector<Tensor> master_buffers_;     ///< and its buffers
  std::vector<std::shared_ptr<nn::Module>> replicas_;
  std::vector<std::vector<Tensor>> replica_parameters_;  ///< parameters() of each replica, cached
  std::vector<std::vector<Tensor>> replica_buffers_;     ///< buffers of each replica, cached
  std::shared_ptr<std::atomic<int64_t>> reduce_ns_ = std::make_shared<std::atomic<int64_t>>(0);
};

}  // namespace tandem::parallel
