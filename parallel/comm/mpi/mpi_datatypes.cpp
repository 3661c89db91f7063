#include "parallel/comm/mpi/mpi_datatypes.h"

#include <array>

#include "engine/error.h"
#include "parallel/comm/host_reduce.h"

namespace tandem::parallel {
namespace {

constexpr std::array<ReduceOp, 5> kOps = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product,
                                          ReduceOp::Min, ReduceOp::Max};
constexpr std::array<DType, 2> kHalfTypes = {DType::BFloat16, DType::Float16};

// MPI calls a user-defined operation with inout[i] = in[i] ⊕ inout[i]; all of ours commute.
template <ReduceOp Op, DType Type>
void reduce_half(void* in, void* inout, int* length, MPI_Datatype*) {
  static const HostReduceFunction combine = host_reduce_function(Op, Type);
  combine(inout, in, inout, static_cast<size_t>(*length));
}

template <ReduceOp Op>
MPI_User_function* half_function(DType dtype) {
  return dtype == DType::BFloat16 ? &reduce_half<Op, DType::BFloat16>
                                  : &reduce_half<Op, DType::Float16>;
}

MPI_User_function* half_function(ReduceOp op, DType dtype) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return half_function<ReduceOp::Sum>(dtype);
    case ReduceOp::Product: return half_function<ReduceOp::Product>(dtype);
    case ReduceOp::Min: return half_function<ReduceOp::Min>(dtype);
    case ReduceOp::Max: return half_function<ReduceOp::Max>(dtype);
  }
  TANDEM_FAIL("[mpi] unknown reduce op");
}

// user_ops[op][half type]: created after MPI_Init, freed before MPI_Finalize, on the engine's
// thread (Note [MPI lifetime] in mpi_engine.h); read by callers only in between.
std::array<std::array<MPI_Op, kHalfTypes.size()>, kOps.size()> user_ops{};

size_t half_index(DType dtype) {
  return dtype == DType::BFloat16 ? 0 : 1;
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
  if (dtype == DType::BFloat16 || dtype == DType::Float16) {
    return user_ops[static_cast<size_t>(op)][half_index(dtype)];
  }
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
    for (const DType dtype : kHalfTypes) {
      MPI_Op& slot = user_ops[static_cast<size_t>(op)][half_index(dtype)];
      MPI_Op_create(half_function(op, dtype), /*commute=*/1, &slot);
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
