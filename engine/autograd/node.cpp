#include "engine/autograd/node.h"

#include "engine/autograd/accumulate_grad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/tensor_impl.h"

namespace tandem::autograd {
namespace {
std::atomic<uint64_t> next_sequence_nr{0};
}

Node::Node(Device device, std::vector<Edge> next_edges)
    : device_(device), next_edges_(std::move(next_edges)), sequence_nr_(next_sequence_nr++) {}

FunctionNode::FunctionNode(std::string name, Device device, std::vector<Edge> next_edges,
                           uint32_t num_outputs, BackwardFunction backward)
    : Node(device, std::move(next_edges)),
      name_(std::move(name)),
      num_outputs_(num_outputs),
      backward_(std::move(backward)) {
  for (const Edge& edge : this->next_edges()) needs_input_grad_.push_back(edge.valid());
}

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>& grad_outputs) {
  TANDEM_CHECK(backward_ != nullptr, "[autograd] ", name_,
               ": trying to backward through the graph a second time; its saved tensors were "
               "freed after the first backward (pass retain_graph=true to keep them)");
  return backward_(grad_outputs, needs_input_grad_);
}

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor* input : inputs) {
    if (input != nullptr && input->defined() && input->requires_grad()) return true;
  }
  return false;
}

Edge gradient_edge(const Tensor& tensor) {
  if (!tensor.defined() || !tensor.requires_grad()) return {};
  if (tensor.grad_fn()) return {tensor.grad_fn(), tensor.output_nr()};
  return {grad_accumulator(tensor), 0};
}

namespace {

void record_node(const char* name, const std::vector<Edge>& edges,
                 std::initializer_list<Tensor*> outputs, BackwardFunction backward) {
  const Device device = (*outputs.begin())->device();
  auto node = std::make_shared<FunctionNode>(
      name, device, edges, static_cast<uint32_t>(outputs.size()), std::move(backward));
  uint32_t output_nr = 0;
  for (Tensor* output : outputs) set_history(*output, node, output_nr++);
}

}  // namespace

void record(const char* name, std::initializer_list<const Tensor*> inputs,
            std::initializer_list<Tensor*> outputs, BackwardFunction backward) {
  if (!any_requires_grad(inputs)) return;
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor* input : inputs) edges.push_back(input ? gradient_edge(*input) : Edge{});
  record_node(name, edges, outputs, std::move(backward));
}

void record(const char* name, const std::vector<const Tensor*>& inputs,
            std::initializer_list<Tensor*> outputs, BackwardFunction backward) {
  if (!grad_mode_enabled()) return;
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  bool any = false;
  for (const Tensor* input : inputs) {
    edges.push_back(input ? gradient_edge(*input) : Edge{});
    any = any || edges.back().valid();
  }
  if (any) record_node(name, edges, outputs, std::move(backward));
}

void set_history(const Tensor& tensor, std::shared_ptr<Node> node, uint32_t output_nr) {
  AutogradMeta& meta = tensor.impl()->mutable_autograd();
  meta.requires_grad = node != nullptr;
  meta.grad_fn = std::move(node);
  meta.output_nr = output_nr;
}

}  // namespace tandem::autograd
