#pragma once
/// How Tandem's dtypes and reduce ops map onto MPI's (internal: includes <mpi.h>).
///
/// Note [MPI reductions]: int64, and float32 sums and products, reduce with MPI's own operations
/// (MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX on MPI_FLOAT and MPI_INT64_T). MPI has no bfloat16 or
/// float16 type, so those move as MPI_UINT16_T and reduce with user-defined operations
/// (MPI_Op_create) that call host_reduce.h's functions: each step widens both operands to float,
/// combines them and rounds back, the rule of every host backend (Note [Half all-reduce] in
/// host_reduce.h). float32 min and max are user-defined too, because Open MPI's MPI_MIN/MPI_MAX
/// keep or drop a NaN by which operand holds it (Note [NaN in min and max]); the cost on large
/// buffers is in docs/parallel.md. Avg is a Sum, scaled by 1/size afterwards (finish_average), as
/// on Gloo.

#include <mpi.h>

#include "engine/dtype.h"
#include "parallel/comm/process_group.h"

namespace tandem::parallel {

/// MPI_FLOAT, MPI_INT64_T, MPI_UINT16_T (bfloat16, float16), MPI_UINT8_T.
MPI_Datatype mpi_datatype(DType dtype);
/// The operation that reduces `dtype` with `op` (Avg: the Sum's). Needs create_mpi_user_ops().
MPI_Op mpi_op(ReduceOp op, DType dtype);

/// Creates the user-defined operations of Note [MPI reductions]; once, after MPI_Init.
void create_mpi_user_ops();
/// Frees them; before MPI_Finalize.
void free_mpi_user_ops();

}  // namespace tandem::parallel
