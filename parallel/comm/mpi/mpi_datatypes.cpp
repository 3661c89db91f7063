#include "parallel/comm/mpi/mpi_datatypes.h"

#include <array>

#include "engine/error.h"
#include "parallel/comm/host_reduce.h"

namespace tandem::parallel {
namespace {

constexpr std::array<ReduceOp, 5> kOps = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product,
                                          ReduceOp::Min, ReduceOp::Max};
// The dtypes that some op reduces with a user-defined operation (Note [MPI reductions]).
constexpr std::array<DType, 3> kUserTypes = {DType::BFloat16, DType::Float16, DType::Float32};

// MPI has no 16-bit float types, and its MPI_MIN/MPI_MAX drop a NaN or keep it by which operand
// holds it (Note [NaN in min and max] in host_reduce.h).
bool needs_user_op(ReduceOp op, DType dtype) {
  if (dtype == DType::BFloat16 || dtype == DType::Float16) return true;
  return dtype == DType::Float32 && (op == ReduceOp::Min || op == ReduceOp::Max);
}

// MPI calls a user-defined operation with inout[i] = in[i] ⊕ inout[i]; all of ours commute.
template <ReduceOp Op, DType Type>
void reduce_on_host(void* in, void* inout, int* length, MPI_Datatype*) {
  static const HostReduceFunction combine = host_reduce_function(Op, Type);
  combine(inout, in, inout, static_cast<size_t>(*length));
}

template <ReduceOp Op>
MPI_User_function* user_function(DType dtype) {
  switch (dtype) {
    case DType::BFloat16: return &reduce_on_host<Op, DType::BFloat16>;
    case DType::Float16: return &reduce_on_host<Op, DType::Float16>;
    case DType::Float32: return &reduce_on_host<Op, DType::Float32>;
    case DType::Int64:
    case DType::UInt8: break;
  }
  TANDEM_FAIL("[mpi] no user-defined reduction for ", dtype_name(dtype));
}

MPI_User_function* user_function(ReduceOp op, DType dtype) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return user_function<ReduceOp::Sum>(dtype);
    case ReduceOp::Product: return user_function<ReduceOp::Product>(dtype);
    case ReduceOp::Min: return user_function<ReduceOp::Min>(dtype);
    case ReduceOp::Max: return user_function<ReduceOp::Max>(dtype);
  }
  TANDEM_FAIL("[mpi] unknown reduce op");
}

// user_ops[op][user type]: created after MPI_Init, freed before MPI_Finalize, on the engine's
// thread (Note [MPI lifetime] in mpi_engine.h); read by callers only in between. Null where
// needs_user_op() is false.
std::array<std::array<MPI_Op, kUserTypes.size()>, kOps.size()> user_ops{};

MPI_Op& user_op(ReduceOp op, DType dtype) {
  const size_t type = dtype == DType::BFloat16 ? 0 : dtype == DType::Float16 ? 1 : 2;
  return user_ops[static_cast<size_t>(op)][type];
}

}  // namespace

MPI_Datatype mpi_datatype(DType dtype) {
  switch (dtype) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Int64: return MPI_INT64_T;
    case DType::BFloat16:
    case DType::Float16: return MPI_UINT16_T;
    case DType::UInt8: return MPI_UINT8_T;
  }
  TANDEM_FAIL("[mpi] no MPI datatype for ", dtype_name(dtype));
}

MPI_Op mpi_op(ReduceOp op, DType dtype) {
  TANDEM_CHECK(reduce_op_supports(op, dtype), "[mpi] ", reduce_op_name(op), " does not reduce ",
               dtype_name(dtype), " tensors");
  if (needs_user_op(op, dtype)) return user_op(op, dtype);
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Product: return MPI_PROD;
    case ReduceOp::Min: return MPI_MIN;
    case ReduceOp::Max: return MPI_MAX;
  }
  TANDEM_FAIL("[mpi] unknown reduce op");
}

void create_mpi_user_ops() {
  for (const ReduceOp op : kOps) {
    for (const DType dtype : kUserTypes) {
      if (needs_user_op(op, dtype))
        MPI_Op_create(user_function(op, dtype), /*commute=*/1, &user_op(op, dtype));
    }
  }
}

void free_mpi_user_ops() {
  for (auto& by_type : user_ops) {
    for (MPI_Op& op : by_type) {
      if (op != MPI_Op{} && op != MPI_OP_NULL) MPI_Op_free(&op);
    }
  }
}

}  // namespace tandem::parallel
