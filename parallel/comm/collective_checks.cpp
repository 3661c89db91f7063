#include "parallel/comm/collective_checks.h"

#include <map>

#include "engine/error.h"

namespace tandem::parallel {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Avg: return "avg";
    case ReduceOp::Product: return "product";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
  }
  return "?";
}

namespace {

bool is_float(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::BFloat16 || dtype == DType::Float16;
}

// "rank 1", "ranks 0, 2 and 3".
std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) text += (i + 1 == ranks.size()) ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  return text;
}

}  // namespace

bool reduce_op_supports(ReduceOp op, DType dtype) {
  if (is_float(dtype)) return true;
  return dtype == DType::Int64 && op != ReduceOp::Avg;
}

void check_collective_dtype(const char* backend, const std::string& op, size_t index, DType dtype) {
  TANDEM_CHECK(is_float(dtype) || dtype == DType::Int64, "[", backend, "] ", op, ": tensor ", index,
               " is ", dtype_name(dtype), "; supported: float32, bfloat16, float16, int64");
}

void check_reduce_dtype(const char* backend, const std::string& op, size_t index, DType dtype,
                        ReduceOp reduce_op) {
  check_collective_dtype(backend, op, index, dtype);
  TANDEM_CHECK(reduce_op_supports(reduce_op, dtype), "[", backend, "] ", op, ": ",
               reduce_op_name(reduce_op), " does not reduce ", dtype_name(dtype),
               " tensors (tensor ", index, "); ", reduce_op_name(reduce_op),
               " takes float32, bfloat16, float16");
}

// --- Note [Collective consistency]

std::string describe_call(const std::string& op, const std::vector<Tensor>& tensors, int root,
                          const ReduceOp* reduce_op) {
  std::string text = op;
  if (reduce_op != nullptr) text += std::string(" ") + reduce_op_name(*reduce_op);
  if (root >= 0) text += " at root " + std::to_string(root);
  for (size_t i = 0; i < tensors.size(); ++i) {
    text += (i == 0 ? ": " : ", ") + std::to_string(tensors[i].numel()) + " " +
            dtype_name(tensors[i].dtype());
  }
  return text;
}

uint64_t fingerprint(const std::string& description) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64 bits
  for (const char c : description) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string describe_mismatch(const std::vector<std::string>& by_rank) {
  bool all_equal = true;
  for (const std::string& call : by_rank) all_equal = all_equal && call == by_rank.front();
  if (all_equal) return "";
  // Equal calls together, in the order of their first rank.
  std::vector<std::string> calls;
  std::map<std::string, std::vector<int>> ranks_of;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    auto& ranks = ranks_of[by_rank[r]];
    if (ranks.empty()) calls.push_back(by_rank[r]);
    ranks.push_back(static_cast<int>(r));
  }
  std::string text = "the ranks were not asked for the same collective, so none ran it: ";
  for (size_t i = 0; i < calls.size(); ++i) {
    text += (i > 0 ? "; " : "") + rank_list(ranks_of[calls[i]]) + ": " + calls[i];
  }
  return text +
         " (every rank must issue the same collectives in the same order, with tensors of the "
         "same sizes and dtypes)";
}

bool is_own_chunk(const Tensor& output, const Tensor& input, int rank) {
  const auto* chunk =
      static_cast<const char*>(output.data_ptr()) + static_cast<size_t>(rank) * input.nbytes();
  return input.numel() > 0 && static_cast<const char*>(input.data_ptr()) == chunk;
}

std::string alltoall_counts_mismatch(const std::vector<std::vector<int64_t>>& counts) {
  const size_t size = counts.size();
  for (size_t from = 0; from < size; ++from) {
    TANDEM_CHECK(counts[from].size() == 2 * size, "[alltoall] rank ", from, " has ",
                 counts[from].size(), " counts, expected ", 2 * size);
  }
  for (size_t from = 0; from < size; ++from) {
    for (size_t to = 0; to < size; ++to) {
      const int64_t sent = counts[from][to];
      const int64_t expected = counts[to][size + from];
      if (sent == expected) continue;
      return detail::concat("the ranks' alltoall sizes do not match, so none ran it: rank ", from,
                            " sends ", sent, " elements to rank ", to, ", which expects ", expected,
                            " from it (each rank's input part for rank s must have as many "
                            "elements as rank s's output part for it)");
    }
  }
  return "";
}

}  // namespace tandem::parallel
