#pragma once
/// The checks every backend's collectives share: the dtype rules, and Note [Collective
/// consistency] (process_group.h) as pure functions on what the ranks exchanged, so that a
/// backend (Gloo, MPI) only moves the bytes: each rank describes its call
/// (describe_*), the ranks all-gather the descriptions' fingerprints, and where they differ the
/// descriptions themselves, from which every rank builds the same message
/// (describe_mismatch). For alltoall, whose ranks legitimately pass different sizes, they also
/// all-gather their element counts (alltoall_counts_mismatch).

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "parallel/comm/types.h"

namespace tandem::parallel {

/// Throws "[<backend>] <op>: tensor <index> is uint8; supported: float32, bfloat16, float16,
/// int64" unless collectives move `dtype`.
void check_collective_dtype(const char* backend, const std::string& op, size_t index, DType dtype);
/// Throws "[<backend>] <op>: avg does not reduce int64 tensors (tensor <index>); avg takes
/// float32, bfloat16, float16" unless reduce_op_supports(reduce_op, dtype).
void check_reduce_dtype(const char* backend, const std::string& op, size_t index, DType dtype,
                        ReduceOp reduce_op);

/// allgather_into_tensor in place: `input` is rank `rank`'s chunk of `output` (the same memory),
/// as sharded data parallel gathers its parameters. Gloo then takes no input and MPI takes
/// MPI_IN_PLACE, where copying the chunk onto itself would be undefined (overlapping memcpy).
bool is_own_chunk(const Tensor& output, const Tensor& input, int rank);

// --- Note [Collective consistency]

/// One rank's call, in words that are equal on every rank exactly when the calls match:
/// "allreduce sum: 8 float32, 2 int64", "broadcast from 1: 3 float32", "barrier". The counts
/// are element counts: shapes may differ as long as the data lines up (PyTorch's Gloo allows
/// that too). `root` < 0 and a null `reduce_op` leave them out.
std::string describe_call(const std::string& op, const std::vector<Tensor>& tensors, int root,
                          const ReduceOp* reduce_op);
/// 64-bit FNV-1a of a description: what the ranks exchange first.
uint64_t fingerprint(const std::string& description);
/// The message for descriptions (by rank) that are not all equal, the same on every rank:
/// "the ranks were not asked for the same collective, so none ran it: rank 0: allreduce sum:
/// 8 float32; rank 1: allreduce sum: 7 float32 (every rank must issue the same collectives in
/// the same order, with tensors of the same sizes and dtypes)"; ranks with equal calls are named
/// together ("ranks 0, 2 and 3: ..."). Empty when all are equal.
std::string describe_mismatch(const std::vector<std::string>& by_rank);
/// counts[r]: rank r's alltoall element counts, size() sent to each rank, then size() received
/// from each. Empty when every rank sends each other rank as many elements as that rank
/// receives from it; else the same message on every rank, naming the first pair that
/// disagrees: "rank 0 sends 3 elements to rank 1, which expects 2 from it".
std::string alltoall_counts_mismatch(const std::vector<std::vector<int64_t>>& counts);

}  // namespace tandem::parallel
