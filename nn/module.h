#pragma once
/// Module: the tree of layers. Parameters, buffers and children are registered
/// by name, in order, so that named_parameters() and state_dict() produce
/// PyTorch's keys ("layer1.0.conv1.weight", "bn1.running_mean") in PyTorch's
/// order (DDP's buckets follow that order).

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "engine/memory_format.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "nn/precision.h"

namespace tandem::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;

  virtual Tensor forward(const Tensor& input) = 0;
  /// Runs the forward pre-hooks, then forward() (PyTorch's Module.__call__). Parents call their
  /// children through it, so that a hook sees each call; a layer's own variants (BatchNorm2d's
  /// forward_relu and forward_add_relu) skip the hooks.
  Tensor operator()(const Tensor& input);

  /// Runs before each forward() called through operator(), in registration order; returns the
  /// input that forward() (or the next hook) gets: `input` itself, or a replacement (PyTorch's
  /// register_forward_pre_hook). ZeRO stage 3 gathers a unit's parameters in one.
  using ForwardPreHook = std::function<Tensor(Module& module, const Tensor& input)>;
  /// Returns an id for remove_forward_pre_hook().
  int register_forward_pre_hook(ForwardPreHook hook);
  void remove_forward_pre_hook(int id);
  /// Short name for printing, e.g. "Conv2d(16, 32, kernel=3, stride=2)".
  virtual std::string describe() const = 0;

  /// Parameters of this module and its children, depth first in registration order.
  /// Every parameter once, in state_dict() order (a tensor registered under two names, as tied
  /// weights are, keeps its first name; state_dict() lists both).
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  /// Parameters and buffers, in torch.nn.Module.state_dict() order and naming.
  NamedTensors state_dict() const;
  int64_t parameter_count() const;

  /// Training mode (batch statistics) or evaluation mode, recursively.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// What convolutions and linear layers compute in, recursively (Note [Mixed precision]).
  /// Parameters stay float32 either way.
  void set_precision(Precision precision);
  Precision precision() const { return precision_; }

  /// Moves parameters, buffers and gradients in place: tensor handles stay valid.
  void to(Device device);
  /// Lays out every 4-D parameter, buffer and gradient in `format`, in place (PyTorch's
  /// `module.to(memory_format=...)`). Values and names are unchanged: checkpoints hold NCHW
  /// values whatever the format in memory (Note [Memory formats]).
  void to(MemoryFormat format);
  /// Drops the gradients of all parameters (set_to_none, PyTorch's default).
  void zero_grad();
  /// Fills parameters and buffers with their initial values, module by module, drawn from
  /// `generator` (layers hold PyTorch's default initialisation from construction already).
  void reset_parameters(Generator& generator);

  /// An independent deep copy (same structure, values, device, mode). DataParallel builds its
  /// replicas with it.
  std::shared_ptr<Module> clone() const;

  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const {
    return children_;
  }

 protected:
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Registers a leaf that requires grad; returns the handle to keep.
  Tensor register_parameter(std::string name, Tensor value);
  Tensor register_buffer(std::string name, Tensor value);
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> child) {
    children_.emplace_back(std::move(name), child);
    return child;
  }

  /// A new module of the same type and options, freshly constructed (clone() fills in the values).
  virtual std::shared_ptr<Module> make_twin() const = 0;
  /// This module's own parameters and buffers (not its children's) get their initial values.
  virtual void reset_own_parameters(Generator& generator) {}
  /// Called last in a layer's constructor: its own parameters get their initial values from the
  /// process-wide generator (Note [Initialised at construction] in nn/default_init.h).
  void initialise_by_default();

 private:
  void collect(const std::string& prefix, bool parameters, bool buffers, NamedTensors& out) const;

  NamedTensors parameters_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<std::pair<int, ForwardPreHook>> forward_pre_hooks_;  ///< by id; not cloned
  int next_hook_id_ = 0;
  bool training_ = true;
  Precision precision_ = Precision::Float32;
};

}  // namespace tandem::nn
