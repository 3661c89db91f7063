#pragma once
/// The element-wise reductions of the host backends (Gloo, MPI), for every ReduceOp
/// and dtype that reduce_op_supports() accepts. Gloo has none for bfloat16, its float16 ones are
/// its own, and its int64 sums overflow into undefined behaviour; these are the same for every
/// backend that runs on the host.
///
/// Note [Half all-reduce]: a 16-bit reduction widens both operands to float, combines them and
/// rounds back: one rounding per step, as NCCL's native bfloat16/float16 reductions do.
/// int64 sums and products wrap around (two's complement), as they do on GPUs.
///
/// Note [NaN in min and max]: min and max of floating types return NaN when either operand is
/// NaN, so a NaN on any rank gives NaN on every rank, as torch.maximum/minimum and numpy's
/// maximum/minimum do. std::max (Gloo's own max, PyTorch's Gloo) and Open MPI's MPI_MAX keep or
/// drop a NaN by which operand holds it, so their answer depends on the rank that held it and on
/// the order the algorithm combines in. NCCL's ncclMax/ncclMin (fmaxf, __hmax) drop it, so the
/// NCCL group reduces ordered integer keys instead (Note [NaN in NCCL min and max] in
/// nccl/nccl_collectives.cpp); there the NaN that comes out is a quiet NaN, not the operand.

#include <cstddef>
#include <functional>

#include "engine/tensor.h"
#include "parallel/comm/process_group.h"

namespace tandem::parallel {

/// out[i] = a[i] ⊕ b[i] for i < n; `out` may alias `a` or `b` (every element is read before it
/// is written). Gloo's reduce-function signature.
using HostReduceFunction = std::function<void(void* out, const void* a, const void* b, size_t n)>;

/// The function that combines two partial results of `op` on `dtype`: Avg combines as Sum
/// (finish_average() divides at the end). Throws unless reduce_op_supports(op, dtype).
HostReduceFunction host_reduce_function(ReduceOp op, DType dtype);

/// Avg's last step on a reduced sum (CPU, dense): × 1/size in float, so a 16-bit type rounds
/// once more.
void finish_average(const Tensor& sum, int size);

}  // namespace tandem::parallel
