// Reductions: sums over any set of dims (accumulated in double; float32 or bfloat16 in, the same
// dtype out, rounded once), row argmax.

#include <algorithm>

#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/float_types.h"
#include "engine/cpu/parallel.h"

namespace tandem::cpu {
namespace {

// Consecutive dims of the same kind (kept or reduced) merged into one group.
struct Group {
  int64_t size;
  int64_t stride;
  bool reduced;
};

std::vector<Group> group_dims(const Shape& shape, const std::vector<int64_t>& dims) {
  const Shape strides = contiguous_strides(shape);
  std::vector<Group> groups;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(i)) != dims.end();
    if (!groups.empty() && groups.back().reduced == reduced) {
      groups.back().size *= shape[i];  // contiguous input: merging keeps strides valid
      groups.back().stride = strides[i];
    } else {
      groups.push_back({shape[i], strides[i], reduced});
    }
  }
  return groups;
}

int64_t unravel_offset(int64_t index, const std::vector<Group>& groups) {
  int64_t offset = 0;
  for (size_t g = groups.size(); g-- > 0;) {
    offset += (index % groups[g].size) * groups[g].stride;
    index /= groups[g].size;
  }
  return offset;
}

template <typename T>
void sum_typed(const Tensor& in, const std::vector<int64_t>& dims, Tensor& out) {
  const T* x = static_cast<const T*>(in.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  std::vector<Group> kept;
  std::vector<Group> reduced;
  for (const Group& group : group_dims(in.shape(), dims)) {
    (group.reduced ? reduced : kept).push_back(group);
  }
  const int64_t outputs = out.numel();
  if (in.numel() == 0) {
    std::fill(y, y + outputs, narrow<T>(0.0f));
    return;
  }
  // The innermost reduced group is walked as a strided row; the rest are unravelled.
  const Group inner = reduced.empty() ? Group{1, 1, true} : reduced.back();
  if (!reduced.empty()) reduced.pop_back();
  int64_t rows = 1;
  for (const Group& group : reduced) rows *= group.size;
  parallel_for(outputs, 1, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const T* base = x + unravel_offset(o, kept);
      double total = 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = base + unravel_offset(r, reduced);
        for (int64_t i = 0; i < inner.size; ++i) total += widen(row[i * inner.stride]);
      }
      y[o] = narrow<T>(static_cast<float>(total));
    }
  });
}

}  // namespace

void CpuBackend::sum(const Tensor& in, const std::vector<int64_t>& dims, Tensor& out) {
  check_kernel_dtypes("sum", in.dtype(), {&out});
  dispatch_float_types(in.dtype(), "sum",
                       [&](auto type) { sum_typed<decltype(type)>(in, dims, out); });
}

void CpuBackend::argmax_rows(const Tensor& in, Tensor& out) {
  const float* x = in.data<float>();
  int64_t* y = out.data<int64_t>();
  const int64_t cols = in.size(1);
  parallel_for(in.size(0), 1024, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x + r * cols;
      y[r] = std::max_element(row, row + cols) - row;
    }
  });
}

}  // namespace tandem::cpu
