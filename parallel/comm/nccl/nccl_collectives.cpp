// The NCCL group's operations: each builds an NcclCall (the NCCL calls to make inside one
// ncclGroupStart/End) and launches it on the group's stream (Note [NCCL stream order]); gather,
// scatter, alltoall and point-to-point are ncclSend/ncclRecv (Note [NCCL point-to-point]).
#include <numeric>

#include "engine/cuda/runtime/cuda_check.h"
#include "engine/error.h"
#include "engine/ops/factory.h"
#include "parallel/comm/nccl/nccl_call.h"
#include "parallel/comm/nccl/nccl_process_group.h"

namespace tandem::parallel {
namespace {

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::Float32: return ncclFloat32;
    case DType::Int64: return ncclInt64;
    case DType::UInt8: return ncclUint8;
    // NCCL reduces these natively: each step widens to float and rounds back once.
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
  }
  TANDEM_FAIL("[nccl] unknown dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Product: return ncclProd;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
  }
  TANDEM_FAIL("[nccl] unknown reduce op");
}

// The byte at element `offset` of `t`.
uint8_t* at(const Tensor& t, int64_t offset) {
  return static_cast<uint8_t*>(t.data_ptr()) + static_cast<size_t>(offset) * dtype_size(t.dtype());
}

// A rank's own part of gather, scatter and alltoall: a device copy on the NCCL stream.
void copy_part(void* to, const void* from, size_t bytes, cudaStream_t stream) {
  if (bytes > 0) {
    CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream));
  }
}

// Runs `call` on each tensor that has elements, stopping at the first failure.
template <typename Call>
ncclResult_t for_each_tensor(const std::vector<Tensor>& tensors, Call&& call) {
  for (const Tensor& t : tensors) {
    if (t.numel() == 0) continue;
    const ncclResult_t result = call(t, static_cast<size_t>(t.numel()), nccl_type(t.dtype()));
    if (result != ncclSuccess) return result;
  }
  return ncclSuccess;
}

// The calls of one group, in order, until one fails: that failure is the group's result.
class FirstFailure {
 public:
  template <typename Call>
  void operator()(Call&& call) {
    if (result_ == ncclSuccess) result_ = call();
  }
  ncclResult_t result() const { return result_; }

 private:
  ncclResult_t result_ = ncclSuccess;
};

}  // namespace

std::shared_ptr<Work> NcclProcessGroup::run_allreduce(const std::string& op,
                                                      std::vector<Tensor> tensors,
                                                      ReduceOp reduce_op) {
  const ncclRedOp_t nccl_reduce = nccl_op(reduce_op);
  return launch(
      op, tensors, {[&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
        return for_each_tensor(tensors, [&](const Tensor& t, size_t n, ncclDataType_t type) {
          return nccl.all_reduce(t.data_ptr(), t.data_ptr(), n, type, nccl_reduce, comm, s);
        });
      }});
}

std::shared_ptr<Work> NcclProcessGroup::run_broadcast(const std::string& op,
                                                      std::vector<Tensor> tensors, int root) {
  return launch(op, tensors, {[&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                  return for_each_tensor(
                      tensors, [&](const Tensor& t, size_t n, ncclDataType_t type) {
                        return nccl.broadcast(t.data_ptr(), t.data_ptr(), n, type, root, comm, s);
                      });
                }});
}

// In place: NCCL writes the result only on the root, so the others keep their values.
std::shared_ptr<Work> NcclProcessGroup::run_reduce(const std::string& op,
                                                   std::vector<Tensor> tensors, int root,
                                                   ReduceOp reduce_op) {
  const ncclRedOp_t nccl_reduce = nccl_op(reduce_op);
  return launch(
      op, tensors, {[&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
        return for_each_tensor(tensors, [&](const Tensor& t, size_t n, ncclDataType_t type) {
          return nccl.reduce(t.data_ptr(), t.data_ptr(), n, type, nccl_reduce, root, comm, s);
        });
      }});
}

std::shared_ptr<Work> NcclProcessGroup::run_allgather(const std::string& op, Tensor output,
                                                      Tensor input) {
  return launch(op, {output, input}, {[&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                  if (input.numel() == 0) return ncclSuccess;
                  return nccl.all_gather(input.data_ptr(), output.data_ptr(),
                                         static_cast<size_t>(input.numel()),
                                         nccl_type(input.dtype()), comm, s);
                }});
}

// NCCL has no gather: the root receives from every other rank (PyTorch's NCCL gather does the
// same).
std::shared_ptr<Work> NcclProcessGroup::run_gather(const std::string& op, Tensor output,
                                                   Tensor input, int root) {
  std::vector<Tensor> used = {input};
  if (output.defined()) used.push_back(output);
  return launch(op, used, {[&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                  const int64_t n = input.numel();
                  const ncclDataType_t type = nccl_type(input.dtype());
                  if (n == 0) return ncclSuccess;
                  if (rank() != root) {
                    return nccl.send(input.data_ptr(), static_cast<size_t>(n), type, root, comm, s);
                  }
                  FirstFailure calls;
                  for (int r = 0; r < size(); ++r) {
                    if (r == root) {
                      copy_part(at(output, r * n), input.data_ptr(), input.nbytes(), s);
                      continue;
                    }
                    calls([&] {
                      return nccl.recv(at(output, r * n), static_cast<size_t>(n), type, r, comm, s);
                    });
                  }
                  return calls.result();
                }});
}

std::shared_ptr<Work> NcclProcessGroup::run_scatter(const std::string& op, Tensor output,
                                                    Tensor input, int root) {
  std::vector<Tensor> used = {output};
  if (input.defined()) used.push_back(input);
  return launch(op, used, {[&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                  const int64_t n = output.numel();
                  const ncclDataType_t type = nccl_type(output.dtype());
                  if (n == 0) return ncclSuccess;
                  if (rank() != root) {
                    return nccl.recv(output.data_ptr(), static_cast<size_t>(n), type, root, comm,
                                     s);
                  }
                  FirstFailure calls;
                  for (int r = 0; r < size(); ++r) {
                    if (r == root) {
                      copy_part(output.data_ptr(), at(input, r * n), output.nbytes(), s);
                      continue;
                    }
                    calls([&] {
                      return nccl.send(at(input, r * n), static_cast<size_t>(n), type, r, comm, s);
                    });
                  }
                  return calls.result();
                }});
}

std::shared_ptr<Work> NcclProcessGroup::run_reduce_scatter(const std::string& op, Tensor output,
                                                           Tensor input, ReduceOp reduce_op) {
  const ncclRedOp_t nccl_reduce = nccl_op(reduce_op);
  return launch(op, {output, input}, {[&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                  if (output.numel() == 0) return ncclSuccess;
                  return nccl.reduce_scatter(input.data_ptr(), output.data_ptr(),
                                             static_cast<size_t>(output.numel()),
                                             nccl_type(output.dtype()), nccl_reduce, comm, s);
                }});
}

// Every pair exchanges its parts with a send and a receive; a part of no elements is skipped on
// both sides (they agree on the counts).
std::shared_ptr<Work> NcclProcessGroup::run_alltoall(const std::string& op, Tensor output,
                                                     Tensor input,
                                                     std::vector<int64_t> output_counts,
                                                     std::vector<int64_t> input_counts) {
  return launch(op, {output, input}, {[&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                  const ncclDataType_t type = nccl_type(input.dtype());
                  FirstFailure calls;
                  int64_t in_offset = 0, out_offset = 0;
                  for (int r = 0; r < size(); ++r) {
                    const int64_t sent = input_counts[r], received = output_counts[r];
                    if (r == rank()) {
                      copy_part(at(output, out_offset), at(input, in_offset),
                                static_cast<size_t>(sent) * dtype_size(input.dtype()), s);
                    } else {
                      if (sent > 0) {
                        calls([&] {
                          return nccl.send(at(input, in_offset), static_cast<size_t>(sent), type, r,
                                           comm, s);
                        });
                      }
                      if (received > 0) {
                        calls([&] {
                          return nccl.recv(at(output, out_offset), static_cast<size_t>(received),
                                           type, r, comm, s);
                        });
                      }
                    }
                    in_offset += sent;
                    out_offset += received;
                  }
                  return calls.result();
                }});
}

// PyTorch's NCCL barrier: a one-element all-reduce whose wait() blocks the host.
std::shared_ptr<Work> NcclProcessGroup::run_barrier(const std::string& op) {
  const Tensor token = zeros({1}, {.device = tensor_device()});
  return launch(op, {token},
                {.collective =
                     [&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                       return nccl.all_reduce(token.data_ptr(), token.data_ptr(), 1, ncclFloat32,
                                              ncclSum, comm, s);
                     }},
                /*host_blocking_wait=*/true);
}

namespace {

// Note [NCCL point-to-point]: NCCL matches by order alone, so a tag is refused, not ignored.
void check_no_tag(const std::string& op, int tag) {
  TANDEM_CHECK(tag == 0, "[nccl] ", op, ": tag ", tag,
               ": NCCL has no tags and matches sends to receives by their order alone; post "
               "them in the same order on both ranks with tag 0, or use the gloo backend");
}

}  // namespace

std::shared_ptr<Work> NcclProcessGroup::run_send(Tensor tensor, int dst, int tag) {
  check_no_tag("isend", tag);
  return launch("isend", {tensor}, {[&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                  if (tensor.numel() == 0) return ncclSuccess;
                  return nccl.send(tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                                   nccl_type(tensor.dtype()), dst, comm, s);
                }});
}

std::shared_ptr<Work> NcclProcessGroup::run_recv(Tensor tensor, int src, int tag) {
  TANDEM_CHECK(src != kAnySource,
               "[nccl] irecv: NCCL cannot receive from any source (ncclRecv needs the peer); "
               "name the rank, or use the gloo backend");
  check_no_tag("irecv", tag);
  auto work = launch("irecv", {tensor}, {[&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                       if (tensor.numel() == 0) return ncclSuccess;
                       return nccl.recv(tensor.data_ptr(), static_cast<size_t>(tensor.numel()),
                                        nccl_type(tensor.dtype()), src, comm, s);
                     }});
  work->set_source_rank(src);
  return work;
}

// Note [NCCL point-to-point]: every send and receive in one group, so that NCCL progresses them
// together (an exchange between two ranks needs it).
std::vector<std::shared_ptr<Work>> NcclProcessGroup::run_batch_isend_irecv(std::vector<P2POp> ops) {
  std::vector<Tensor> used;
  for (size_t i = 0; i < ops.size(); ++i) {
    check_no_tag(detail::concat("batch_isend_irecv (op ", i, ")"), ops[i].tag);
    used.push_back(ops[i].tensor);
  }
  auto work =
      launch("batch_isend_irecv", used, {[&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
               FirstFailure calls;
               for (const P2POp& p2p : ops) {
                 const Tensor& t = p2p.tensor;
                 if (t.numel() == 0) continue;
                 const auto n = static_cast<size_t>(t.numel());
                 calls([&] {
                   return p2p.kind == P2POp::Kind::Send
                              ? nccl.send(t.data_ptr(), n, nccl_type(t.dtype()), p2p.peer, comm, s)
                              : nccl.recv(t.data_ptr(), n, nccl_type(t.dtype()), p2p.peer, comm, s);
                 });
               }
               return calls.result();
             }});
  return std::vector<std::shared_ptr<Work>>(ops.size(), work);
}

}  // namespace tandem::parallel
