#pragma once
/// The small types every part of the communication layer names (c10d's Types.hpp): the
/// reductions and the wildcard source. Apart from process_group.h so that the shared checks
/// (collective_checks.h) need not include the class they serve.

#include "engine/dtype.h"

namespace tandem::parallel {

enum class ReduceOp {
  Sum,
  Avg,      ///< sum / size; float tensors only
  Product,  ///< products of 16-bit floats round once per multiplication
  Min,
  Max,
};

/// "sum", "avg", "product", "min", "max".
const char* reduce_op_name(ReduceOp op);
/// Whether `op` reduces tensors of `dtype`: every op float32, bfloat16 and float16; every op
/// but Avg int64 (whose sums and products wrap around on overflow); none uint8.
bool reduce_op_supports(ReduceOp op, DType dtype);

/// irecv()'s source for "whichever rank sends first" (PyTorch's recv with src=None).
inline constexpr int kAnySource = -1;

}  // namespace tandem::parallel
