#include "parallel/replicate.h"

#include <algorithm>
#include <chrono>

#include "engine/autograd/grad_mode.h"
#include "engine/ops/elementwise.h"
#include "engine/ops/factory.h"
#include "engine/profiler.h"

namespace tandem::parallel {
namespace {

std::vector<Tensor> buffers_of(const nn::Module& module) {
  std::vector<Tensor> out;
  for (const auto& [name, tensor] : module.named_buffers()) out.push_back(tensor);
  return out;
}

// Makes `replica` hold master's values: the same storage where sharing is right, else a copy.
void refresh_tensor(const Tensor& master, const Tensor& replica, bool share) {
  if (share) {
    if (replica.storage() != master.storage()) replica.set_data(master.detach());
  } else {
    // A fresh tensor also when the layouts differ: replicas compute in the master's format.
    if (replica.storage() == master.storage() || replica.strides() != master.strides()) {
      replica.set_data(empty_like(master));
    }
    Tensor target = replica.detach();
    target.copy_(master);
  }
}

}  // namespace

ReduceAddNode::ReduceAddNode(const Tensor& master_parameter, uint32_t replicas,
                             std::shared_ptr<std::atomic<int64_t>> reduce_ns)
    : Node(master_parameter.device(), {autograd::gradient_edge(master_parameter)}),
      replicas_(replicas),
      reduce_ns_(std::move(reduce_ns)) {}

std::vector<Tensor> ReduceAddNode::apply(std::vector<Tensor>& grad_outputs) {
  const auto start = std::chrono::steady_clock::now();
  Tensor sum;
  for (const Tensor& grad : grad_outputs) {  // replica order: the same sum whatever finished first
    if (!grad.defined()) continue;
    Tensor here = grad.to(device());
    sum = sum.defined() ? add(sum, here) : here;
  }
  if (reduce_ns_) {
    reduce_ns_->fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - start)
                              .count());
  }
  return {sum};
}

Replicas::Replicas(std::shared_ptr<nn::Module> master, std::vector<Device> devices, bool persistent)
    : master_(std::move(master)), devices_(std::move(devices)), persistent_(persistent) {
  TANDEM_CHECK(master_ != nullptr, "[DataParallel] no module to replicate");
  TANDEM_CHECK(!devices_.empty(), "[DataParallel] needs at least one device");
}

void Replicas::check_master_on_first_device() const {
  const auto on_first_device = [&](const Tensor& t) { return t.device() == devices_.front(); };
  if (std::all_of(master_parameters_.begin(), master_parameters_.end(), on_first_device) &&
      std::all_of(master_buffers_.begin(), master_buffers_.end(), on_first_device)) {
    return;
  }
  for (const auto& [name, tensor] : master_->state_dict()) {  // only to name the culprit
    TANDEM_CHECK(on_first_device(tensor),
                 "[DataParallel] the module must have its parameters "
                 "and buffers on ",
                 devices_.front(), " (the first device), but ", name, " is on ", tensor.device());
  }
}

void Replicas::build() {
  master_parameters_ = master_->parameters();
  master_buffers_ = buffers_of(*master_);
  replicas_.clear();
  replica_parameters_.clear();
  replica_buffers_.clear();
  for (const Device& device : devices_) {
    std::shared_ptr<nn::Module> replica = master_->clone();
    replica->to(device);
    replica_parameters_.push_back(replica->parameters());
    replica_buffers_.push_back(buffers_of(*replica));
    replicas_.push_back(std::move(replica));
  }
}

std::vector<std::shared_ptr<nn::Module>> Replicas::prepare(size_t count) {
  const profiler::RecordScope scope("DataParallel.replicate", profiler::Category::Annotation);
  TANDEM_CHECK(count >= 1 && count <= devices_.size(), "[DataParallel] asked for ", count,
               " replicas of ", devices_.size());
  if (!persistent_ || replicas_.empty()) build();
  check_master_on_first_device();
  refresh(count);
  tie(count);
  return {replicas_.begin(), replicas_.begin() + static_cast<std::ptrdiff_t>(count)};
}

void Replicas::refresh(size_t count) {
  NoGradGuard no_grad;
  const std::vector<Tensor>& parameters = master_parameters_;
  const std::vector<Tensor>& buffers = master_buffers_;
  for (size_t r = 0; r < replicas_.size(); ++r) {
    // Untie every replica first: last step's nodes must not outlive it, and set_data needs leaves.
    for (const Tensor& p : replica_parameters_[r]) autograd::set_history(p, nullptr, 0);
  }
  for (size_t r = 0; r < count; ++r) {
    // Parameters are only read by forward, so a replica on the master's device may share them;
    // buffers are written (running statistics), so only replica 0 shares (Note [Replica buffers]).
    const bool on_master_device = devices_[r] == devices_.front();
    for (size_t i = 0; i < parameters.size(); ++i) {
      refresh_tensor(parameters[i], replica_parameters_[r][i], on_master_device);
    }
    for (size_t i = 0; i < buffers.size(); ++i) {
      refresh_tensor(buffers[i], replica_buffers_[r][i], r == 0);
    }
    replicas_[r]->train(master_->is_training());
  }
}

void Replicas::tie(size_t count) {
  if (!autograd::grad_mode_enabled()) return;
  const std::vector<Tensor>& parameters = master_parameters_;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (!parameters[i].requires_grad()) continue;
    auto node =
        std::make_shared<ReduceAddNode>(parameters[i], static_cast<uint32_t>(count), reduce_ns_);
    for (size_t r = 0; r < count; ++r) {
      autograd::set_history(replica_parameters_[r][i], node, static_cast<uint32_t>(r));
    }
  }
}

}  // namespace tandem::parallel
