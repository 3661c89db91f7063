// ProcessGroup's gathering, scattering and all-to-all collectives: their argument checks, and
// the list forms written once on the backends' flat hooks (Note [Flat collectives]).
#include <numeric>

#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/ops/concat.h"
#include "engine/ops/factory.h"
#include "parallel/comm/collective_checks.h"
#include "parallel/comm/process_group.h"

namespace tandem::parallel {
namespace {

void check_contiguous(const std::string& backend, const std::string& op, const char* what,
                      const Tensor& t) {
  TANDEM_CHECK(t.is_contiguous(), "[", backend, "] ", op, ": the ", what,
               " is not contiguous (the flat collectives read and write it as one buffer)");
}

// Each list entry has the shape and dtype of `like` ("output 2 is float32 [3] but the input is
// float32 [4]").
void check_like(const std::string& backend, const std::string& op, const char* what,
                const std::vector<Tensor>& list, const char* like_name, const Tensor& like) {
  for (size_t i = 0; i < list.size(); ++i) {
    TANDEM_CHECK(list[i].shape() == like.shape() && list[i].dtype() == like.dtype(), "[", backend,
                 "] ", op, ": ", what, " ", i, " is ", dtype_name(list[i].dtype()), " ",
                 shape_str(list[i].shape()), " but the ", like_name, " is ",
                 dtype_name(like.dtype()), " ", shape_str(like.shape()));
  }
}

void check_count(const std::string& backend, const std::string& op, const char* what, size_t count,
                 int size) {
  TANDEM_CHECK(static_cast<int>(count) == size, "[", backend, "] ", op, ": got ", count, " ", what,
               " tensors for ", size, " ranks");
}

// The tensors one after another in one new contiguous buffer (in each one's logical order).
Tensor concatenate(const std::vector<Tensor>& tensors) {
  const NoGradGuard no_grad;
  std::vector<Tensor> flat;
  flat.reserve(tensors.size());
  for (const Tensor& t : tensors) flat.push_back(t.detach().reshape({-1}));
  return cat(flat);
}

// A continuation that copies consecutive parts of `flat` into `outputs` (Note [Flat
// collectives]).
std::function<void()> copy_out(Tensor flat, std::vector<Tensor> outputs) {
  return [flat = std::move(flat), outputs = std::move(outputs)] {
    const NoGradGuard no_grad;
    int64_t offset = 0;
    for (const Tensor& out : outputs) {
      Tensor target = out.detach();
      target.copy_(flat.slice(offset, offset + out.numel()).view(out.shape()));
      offset += out.numel();
    }
  };
}

int64_t elements(const std::vector<int64_t>& counts) {
  return std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

// What an alltoall rank sends itself is what it receives from itself: checked here, as no
// other rank sees both sides.
void check_own_part(const std::string& backend, const std::string& op, int rank,
                    const std::vector<int64_t>& input_counts,
                    const std::vector<int64_t>& output_counts) {
  const auto r = static_cast<size_t>(rank);
  TANDEM_CHECK(input_counts[r] == output_counts[r], "[", backend, "] ", op, ": rank ", rank,
               " sends itself ", input_counts[r], " elements but expects ", output_counts[r],
               " from itself");
}

}  // namespace

std::shared_ptr<Work> ProcessGroup::allgather(std::vector<Tensor>& outputs, const Tensor& input) {
  check_member("allgather");
  check_tensors("allgather", {input}, nullptr);
  check_tensors("allgather", outputs, nullptr);
  check_count(backend_name(), "allgather", "output", outputs.size(), size());
  check_like(backend_name(), "allgather", "output", outputs, "input", input);
  Tensor flat = empty({input.numel() * size()}, {.dtype = input.dtype(), .device = input.device()});
  auto work = run_allgather("allgather", flat, input.contiguous());
  return then(std::move(work), copy_out(flat, outputs));
}

std::shared_ptr<Work> ProcessGroup::allgather_into_tensor(Tensor output, Tensor input) {
  const std::string op = "allgather_into_tensor";
  check_member(op);
  check_tensors(op, {output, input}, nullptr);
  check_contiguous(backend_name(), op, "output", output);
  check_contiguous(backend_name(), op, "input", input);
  TANDEM_CHECK(output.dtype() == input.dtype() && output.numel() == input.numel() * size(), "[",
               backend_name(), "] ", op, ": the output is ", dtype_name(output.dtype()), " ",
               shape_str(output.shape()), "; it must be ", size(), " × the input's ", input.numel(),
               " elements of ", dtype_name(input.dtype()));
  return run_allgather(op, std::move(output), std::move(input));
}

std::shared_ptr<Work> ProcessGroup::gather(std::vector<Tensor> outputs, const Tensor& input,
                                           int root) {
  check_member("gather");
  check_root("gather", root);
  check_tensors("gather", {input}, nullptr);
  if (rank() != root) {
    TANDEM_CHECK(outputs.empty(), "[", backend_name(), "] gather: rank ", rank(), " passed ",
                 outputs.size(), " output tensors, but only the root (rank ", root,
                 ") receives; pass none");
    return run_gather("gather", Tensor(), input.contiguous(), root);
  }
  check_tensors("gather", outputs, nullptr);
  check_count(backend_name(), "gather", "output", outputs.size(), size());
  check_like(backend_name(), "gather", "output", outputs, "input", input);
  Tensor flat = empty({input.numel() * size()}, {.dtype = input.dtype(), .device = input.device()});
  auto work = run_gather("gather", flat, input.contiguous(), root);
  return then(std::move(work), copy_out(flat, std::move(outputs)));
}

std::shared_ptr<Work> ProcessGroup::scatter(Tensor output, const std::vector<Tensor>& inputs,
                                            int root) {
  check_member("scatter");
  check_root("scatter", root);
  check_tensors("scatter", {output}, nullptr);
  check_contiguous(backend_name(), "scatter", "output", output);
  if (rank() != root) {
    TANDEM_CHECK(inputs.empty(), "[", backend_name(), "] scatter: rank ", rank(), " passed ",
                 inputs.size(), " input tensors, but only the root (rank ", root,
                 ") sends; pass none");
    return run_scatter("scatter", std::move(output), Tensor(), root);
  }
  check_tensors("scatter", inputs, nullptr);
  check_count(backend_name(), "scatter", "input", inputs.size(), size());
  check_like(backend_name(), "scatter", "input", inputs, "output", output);
  return run_scatter("scatter", std::move(output), concatenate(inputs), root);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter(Tensor output, const std::vector<Tensor>& inputs,
                                                   ReduceOp op) {
  check_member("reduce_scatter");
  check_tensors("reduce_scatter", {output}, &op);
  check_contiguous(backend_name(), "reduce_scatter", "output", output);
  check_tensors("reduce_scatter", inputs, &op);
  check_count(backend_name(), "reduce_scatter", "input", inputs.size(), size());
  check_like(backend_name(), "reduce_scatter", "input", inputs, "output", output);
  return run_reduce_scatter("reduce_scatter", std::move(output), concatenate(inputs), op);
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_tensor(Tensor output, Tensor input,
                                                          ReduceOp op) {
  const std::string name = "reduce_scatter_tensor";
  check_member(name);
  check_tensors(name, {output, input}, &op);
  check_contiguous(backend_name(), name, "output", output);
  check_contiguous(backend_name(), name, "input", input);
  TANDEM_CHECK(output.dtype() == input.dtype() && input.numel() == output.numel() * size(), "[",
               backend_name(), "] ", name, ": the input is ", dtype_name(input.dtype()), " ",
               shape_str(input.shape()), "; it must be ", size(), " × the output's ",
               output.numel(), " elements of ", dtype_name(output.dtype()),
               " (pad it to a multiple of the group's size)");
  return run_reduce_scatter(name, std::move(output), std::move(input), op);
}

std::shared_ptr<Work> ProcessGroup::alltoall(std::vector<Tensor> outputs,
                                             std::vector<Tensor> inputs) {
  check_member("alltoall");
  check_tensors("alltoall", inputs, nullptr);
  check_tensors("alltoall", outputs, nullptr);
  check_count(backend_name(), "alltoall", "input", inputs.size(), size());
  check_count(backend_name(), "alltoall", "output", outputs.size(), size());
  std::vector<int64_t> input_counts, output_counts;
  for (int r = 0; r < size(); ++r) {
    for (const Tensor* t : {&inputs[r], &outputs[r]}) {
      TANDEM_CHECK(t->dtype() == inputs[0].dtype(), "[", backend_name(),
                   "] alltoall: every tensor must be ", dtype_name(inputs[0].dtype()),
                   " like input 0, but ", t == &inputs[r] ? "input " : "output ", r, " is ",
                   dtype_name(t->dtype()));
    }
    input_counts.push_back(inputs[r].numel());
    output_counts.push_back(outputs[r].numel());
  }
  check_own_part(backend_name(), "alltoall", rank(), input_counts, output_counts);
  Tensor flat =
      empty({elements(output_counts)}, {.dtype = inputs[0].dtype(), .device = inputs[0].device()});
  auto work = run_alltoall("alltoall", flat, concatenate(inputs), std::move(output_counts),
                           std::move(input_counts));
  return then(std::move(work), copy_out(flat, std::move(outputs)));
}

namespace {

// Elements per dim-0 row: [4, 3] → 3, [4] → 1.
int64_t row_elements(const Tensor& t) {
  int64_t row = 1;
  for (size_t d = 1; d < t.shape().size(); ++d) row *= t.shape()[d];
  return row;
}

// alltoall_single's element counts per rank for one side: `splits` rows each, or dim 0 split
// evenly when there are none.
std::vector<int64_t> split_counts(const std::string& backend, const char* side, const Tensor& t,
                                  const std::vector<int64_t>& splits, int size) {
  const std::string op = "alltoall_single";
  TANDEM_CHECK(t.dim() >= 1, "[", backend, "] ", op, ": the ", side,
               " has no dim 0 to split (a scalar)");
  const int64_t rows = t.size(0);
  const int64_t row = row_elements(t);
  std::vector<int64_t> counts;
  if (splits.empty()) {
    TANDEM_CHECK(rows % size == 0, "[", backend, "] ", op, ": the ", side, "'s ", rows,
                 " rows do not split evenly over ", size, " ranks; pass split sizes");
    return std::vector<int64_t>(static_cast<size_t>(size), rows / size * row);
  }
  TANDEM_CHECK(static_cast<int>(splits.size()) == size, "[", backend, "] ", op, ": ", splits.size(),
               " ", side, " split sizes for ", size, " ranks");
  for (const int64_t split : splits) {
    TANDEM_CHECK(split >= 0, "[", backend, "] ", op, ": a negative ", side, " split size (", split,
                 ")");
    counts.push_back(split * row);
  }
  TANDEM_CHECK(elements(splits) == rows, "[", backend, "] ", op, ": the ", side,
               " split sizes add up to ", elements(splits), " rows, but the ", side, " has ", rows);
  return counts;
}

}  // namespace

std::shared_ptr<Work> ProcessGroup::alltoall_single(Tensor output, Tensor input,
                                                    const std::vector<int64_t>& output_split_sizes,
                                                    const std::vector<int64_t>& input_split_sizes) {
  const std::string op = "alltoall_single";
  check_member(op);
  check_tensors(op, {output, input}, nullptr);
  check_contiguous(backend_name(), op, "output", output);
  check_contiguous(backend_name(), op, "input", input);
  std::vector<int64_t> input_counts =
      split_counts(backend_name(), "input", input, input_split_sizes, size());
  std::vector<int64_t> output_counts =
      split_counts(backend_name(), "output", output, output_split_sizes, size());
  TANDEM_CHECK(output.dtype() == input.dtype() && row_elements(output) == row_elements(input), "[",
               backend_name(), "] ", op, ": the output (", dtype_name(output.dtype()), " ",
               shape_str(output.shape()), ") and the input (", dtype_name(input.dtype()), " ",
               shape_str(input.shape()), ") differ in dtype or in the size of a row");
  check_own_part(backend_name(), op, rank(), input_counts, output_counts);
  return run_alltoall(op, std::move(output), std::move(input), std::move(output_counts),
                      std::move(input_counts));
}

}  // namespace tandem::parallel
