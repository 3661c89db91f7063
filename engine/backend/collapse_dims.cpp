#include "engine/backend/collapse_dims.h"

#include "engine/error.h"

namespace tandem {

CollapsedDims collapse_dims(const Shape& shape, std::initializer_list<Shape> strides,
                            const char* op) {
  for (const Shape& operand : strides) {
    TANDEM_CHECK(operand.size() == shape.size(), "[", op, "] strides of rank ", operand.size(),
                 " for a shape of rank ", shape.size(), " ", shape_str(shape));
  }
  const size_t operands = strides.size();
  const Shape* in = strides.begin();
  CollapsedDims dims;
  dims.strides.resize(operands);
  if (shape_numel(shape) == 0) {
    dims.shape = {0};
    for (Shape& s : dims.strides) s = {1};
    return dims;
  }
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;  // Note [Collapsing dims]
    bool merges = !dims.shape.empty();
    for (size_t k = 0; merges && k < operands; ++k) {
      merges = dims.strides[k].back() == in[k][i] * shape[i];
    }
    if (merges) {
      dims.shape.back() *= shape[i];
      for (size_t k = 0; k < operands; ++k) dims.strides[k].back() = in[k][i];
      continue;
    }
    dims.shape.push_back(shape[i]);
    for (size_t k = 0; k < operands; ++k) dims.strides[k].push_back(in[k][i]);
  }
  if (dims.shape.empty()) {
    dims.shape = {1};
    for (Shape& s : dims.strides) s = {1};
  }
  return dims;
}

void check_collapsed_rank(const CollapsedDims& dims, int max_dims, const Shape& shape,
                          const char* op) {
  TANDEM_CHECK(dims.rank() <= static_cast<size_t>(max_dims), "[", op, "] more than ", max_dims,
               " dims that do not merge are not supported (shape ", shape_str(shape), ")");
}

}  // namespace tandem
