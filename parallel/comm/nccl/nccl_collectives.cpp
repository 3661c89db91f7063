// The NCCL group's operations: each builds an NcclCall (the NCCL calls to make inside one
// ncclGroupStart/End) and launches it on the group's stream (Note [NCCL stream order]); gather,
// scatter, alltoall and point-to-point are ncclSend/ncclRecv (Note [NCCL point-to-point]); min
// and max of floating tensors reduce ordered keys (Note [NaN in NCCL min and max]).
#include <memory>
#include <numeric>

#include "engine/cuda/kernels/launch.h"
#include "engine/cuda/runtime/caching_allocator.h"
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

// Runs call(index, tensor, count) on each tensor that has elements, stopping at the first
// failure.
template <typename Call>
ncclResult_t for_each_tensor(const std::vector<Tensor>& tensors, Call&& call) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.numel() == 0) continue;
    const ncclResult_t result = call(i, t, static_cast<size_t>(t.numel()));
    if (result != ncclSuccess) return result;
  }
  return ncclSuccess;
}

// Note [NaN in NCCL min and max]: NCCL's ncclMax and ncclMin on floats (fmaxf, __hmax) drop a
// NaN, where Tandem's min and max keep it (Note [NaN in min and max] in host_reduce.h). So a min
// or max of a floating tensor reduces its ordered keys (Note [Ordered keys] in
// engine/cuda/kernels/ordered_keys.h) with ncclUint32's max or min instead: a kernel writes the
// keys into a scratch buffer before the NCCL group, NCCL reduces them, a kernel decodes the
// result into the output after the group, all on the group's stream. The buffer (4 bytes an
// element) comes from the caching allocator on that stream and goes back once the decode is
// queued: the stream's order keeps it from reuse before the decode has run. The cost, never
// measured on a GPU: two element-wise passes and, for a 16-bit type, twice its bytes on the wire.
bool reduces_keys(ReduceOp op, DType dtype) {
  return (op == ReduceOp::Min || op == ReduceOp::Max) &&
         (dtype == DType::Float32 || dtype == DType::BFloat16 || dtype == DType::Float16);
}

// What NCCL reads or writes for a tensor: the tensor itself, or its keys.
struct NcclBuffer {
  void* data;
  ncclDataType_t type;
};

// The keys of the tensors of one operation (Note [NaN in NCCL min and max]), a buffer each for
// those that need them. It must live until the operation is queued, not until it has run.
class OrderedKeys {
 public:
  OrderedKeys(ReduceOp op, Device device) : op_(op), device_(device.index) {}

  // NcclCall::before: queues the keys of the inputs that need them on `stream`.
  void encode(const std::vector<Tensor>& inputs, cudaStream_t stream) {
    const auto reduction =
        op_ == ReduceOp::Max ? cuda::kernels::KeyReduction::Max : cuda::kernels::KeyReduction::Min;
    for (const Tensor& t : inputs) {
      if (t.numel() == 0 || !reduces_keys(op_, t.dtype())) {
        keys_.emplace_back();
        continue;
      }
      const auto& keys = keys_.emplace_back(std::make_unique<cuda::DeviceBuffer>(
          device_, static_cast<size_t>(t.numel()) * sizeof(uint32_t), stream));
      cuda::kernels::to_ordered_keys(t.data_ptr(), t.dtype(), reduction, key(keys, 0), t.numel(),
                                     stream);
    }
  }
  // What NCCL reads for inputs[i] (`in`): the tensor, or its keys.
  NcclBuffer buffer(size_t i, const Tensor& in) const { return result(i, in, 0); }
  // Where NCCL writes the part of inputs[i]'s result that goes to `out`: `out` itself, or the
  // keys from element `offset` on.
  NcclBuffer result(size_t i, const Tensor& out, int64_t offset) const {
    if (!keys_[i]) return {out.data_ptr(), nccl_type(out.dtype())};
    return {key(keys_[i], offset), ncclUint32};
  }
  // NcclCall::after: `out` ← the values of inputs[i]'s reduced keys from element `offset` on
  // (nothing when the tensor was reduced as it is).
  void decode(size_t i, const Tensor& out, int64_t offset, cudaStream_t stream) const {
    if (!keys_[i]) return;
    cuda::kernels::from_ordered_keys(key(keys_[i], offset), out.dtype(), out.data_ptr(),
                                     out.numel(), stream);
  }
  void decode(const std::vector<Tensor>& outputs, cudaStream_t stream) const {
    for (size_t i = 0; i < outputs.size(); ++i) decode(i, outputs[i], 0, stream);
  }

 private:
  static uint32_t* key(const std::unique_ptr<cuda::DeviceBuffer>& keys, int64_t offset) {
    return static_cast<uint32_t*>(keys->data()) + offset;
  }

  ReduceOp op_;
  int device_;
  std::vector<std::unique_ptr<cuda::DeviceBuffer>> keys_;  // per input; null: reduced as it is
};

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
  OrderedKeys keys(reduce_op, tensor_device());
  return launch(op, tensors,
                {.collective =
                     [&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                       return for_each_tensor(tensors, [&](size_t i, const Tensor& t, size_t n) {
                         const NcclBuffer b = keys.buffer(i, t);
                         return nccl.all_reduce(b.data, b.data, n, b.type, nccl_reduce, comm, s);
                       });
                     },
                 .before = [&](cudaStream_t s) { keys.encode(tensors, s); },
                 .after = [&](cudaStream_t s) { keys.decode(tensors, s); }});
}

std::shared_ptr<Work> NcclProcessGroup::run_broadcast(const std::string& op,
                                                      std::vector<Tensor> tensors, int root) {
  return launch(op, tensors, {[&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                  return for_each_tensor(tensors, [&](size_t, const Tensor& t, size_t n) {
                    return nccl.broadcast(t.data_ptr(), t.data_ptr(), n, nccl_type(t.dtype()), root,
                                          comm, s);
                  });
                }});
}

// In place: NCCL writes the result only on the root, so the others keep their values (and
// decode no keys).
std::shared_ptr<Work> NcclProcessGroup::run_reduce(const std::string& op,
                                                   std::vector<Tensor> tensors, int root,
                                                   ReduceOp reduce_op) {
  const ncclRedOp_t nccl_reduce = nccl_op(reduce_op);
  OrderedKeys keys(reduce_op, tensor_device());
  return launch(op, tensors,
                {.collective =
                     [&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                       return for_each_tensor(tensors, [&](size_t i, const Tensor& t, size_t n) {
                         const NcclBuffer b = keys.buffer(i, t);
                         return nccl.reduce(b.data, b.data, n, b.type, nccl_reduce, root, comm, s);
                       });
                     },
                 .before = [&](cudaStream_t s) { keys.encode(tensors, s); },
                 .after =
                     [&](cudaStream_t s) {
                       if (rank() == root) keys.decode(tensors, s);
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

// With keys, in place in the input's keys: NCCL writes this rank's part at its offset there.
std::shared_ptr<Work> NcclProcessGroup::run_reduce_scatter(const std::string& op, Tensor output,
                                                           Tensor input, ReduceOp reduce_op) {
  const ncclRedOp_t nccl_reduce = nccl_op(reduce_op);
  const int64_t n = output.numel(), offset = rank() * n;
  OrderedKeys keys(reduce_op, tensor_device());
  return launch(op, {output, input},
                {.collective =
                     [&](NcclApi& nccl, ncclComm_t comm, cudaStream_t s) {
                       if (n == 0) return ncclSuccess;
                       const NcclBuffer in = keys.buffer(0, input);
                       const NcclBuffer out = keys.result(0, output, offset);
                       return nccl.reduce_scatter(in.data, out.data, static_cast<size_t>(n),
                                                  in.type, nccl_reduce, comm, s);
                     },
                 .before = [&](cudaStream_t s) { keys.encode({input}, s); },
                 .after = [&](cudaStream_t s) { keys.decode(0, output, offset, s); }});
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
