#pragma once
/// The autograd graph: each Node is the backward of one forward op. It takes
/// the gradients of the op's outputs and returns those of its inputs, which the
/// engine routes along next_edges() to the nodes that produced the inputs.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/tensor.h"

namespace tandem::autograd {

class Node;

/// Points at input `input_nr` of `node` (the node's gradient slot for one of its outputs).
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

class Node {
 public:
  /// device: where this node's backward runs (the device of the op's outputs).
  Node(Device device, std::vector<Edge> next_edges);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  /// grad_outputs[i] is the gradient of forward output i (undefined if none flowed).
  /// Returns one gradient per next edge (undefined where not needed).
  virtual std::vector<Tensor> apply(std::vector<Tensor>& grad_outputs) = 0;
  virtual std::string name() const = 0;
  /// Number of forward outputs, i.e. of gradient slots this node receives.
  virtual uint32_t num_outputs() const { return 1; }
  /// Frees saved tensors once backward has used them (unless retain_graph).
  virtual void release_saved() {}

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  Device device() const { return device_; }
  /// Creation order; the engine runs ready nodes newest first, i.e. in reverse
  /// forward order, which DDP's bucket order relies on.
  uint64_t sequence_nr() const { return sequence_nr_; }
  /// Which of several ready nodes of one device runs first: the highest. Ordinary nodes use
  /// their sequence number; gradient sinks override it (Note [Accumulate first]).
  virtual uint64_t priority() const { return sequence_nr_; }

 private:
  Device device_;
  std::vector<Edge> next_edges_;
  uint64_t sequence_nr_;
};

/// Backward of an ordinary op, given as a function of (output grads, which inputs need a grad).
using BackwardFunction = std::function<std::vector<Tensor>(
    const std::vector<Tensor>& grad_outputs, const std::vector<bool>& needs_input_grad)>;

class FunctionNode final : public Node {
 public:
  FunctionNode(std::string name, Device device, std::vector<Edge> next_edges, uint32_t num_outputs,
               BackwardFunction backward);
  std::vector<Tensor> apply(std::vector<Tensor>& grad_outputs) override;
  std::string name() const override { return name_; }
  uint32_t num_outputs() const override { return num_outputs_; }
  /// Drops the function and with it everything its lambda captured.
  void release_saved() override { backward_ = nullptr; }

 private:
  std::string name_;
  uint32_t num_outputs_;
  std::vector<bool> needs_input_grad_;
  BackwardFunction backward_;
};

/// True when grad mode is on and some input requires a gradient.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);

/// Makes `outputs` the results of a FunctionNode whose backward is `backward`,
/// if any_requires_grad(inputs); otherwise does nothing. Save tensors for
/// backward by capturing them detached (tensor.detach()) so outputs do not own
/// their own node (a reference cycle).
void record(const char* name, std::initializer_list<const Tensor*> inputs,
            std::initializer_list<Tensor*> outputs, BackwardFunction backward);

/// The same, for ops with a variable number of inputs (cat). Null inputs have no edge.
void record(const char* name, const std::vector<const Tensor*>& inputs,
            std::initializer_list<Tensor*> outputs, BackwardFunction backward);

/// The edge along which a gradient for `tensor` must flow (invalid if none).
Edge gradient_edge(const Tensor& tensor);

/// Makes `tensor` output `output_nr` of `node`, as if an op had produced it (null: a leaf that
/// requires no grad). For tensors someone else holds a handle to: DataParallel rebinds each
/// replica's parameters to this step's broadcast node, so layers keep their handles.
void set_history(const Tensor& tensor, std::shared_ptr<Node> node, uint32_t output_nr);

}  // namespace tandem::autograd
