// The NCCL collectives' argument checks, built with or without CUDA so that their messages are
// tested on any machine.
#include "engine/error.h"
#include "parallel/comm/nccl_process_group.h"

namespace tandem::parallel {

void check_nccl_tensors(const std::string& op, const std::vector<Tensor>& tensors, Device device,
                        bool allow_int64) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TANDEM_CHECK(t.defined(), "[nccl] ", op, ": tensor ", i, " is undefined");
    TANDEM_CHECK(t.device() == device, "[nccl] ", op, ": tensor ", i, " is on ", t.device().str(),
                 "; the NCCL process group takes CUDA tensors on ", device.str(),
                 " (use the gloo backend for CPU tensors)");
    TANDEM_CHECK(t.is_dense(), "[nccl] ", op, ": tensor ", i,
                 " is not dense (collectives work in place on contiguous or channels-last "
                 "tensors)");
    check_collective_dtype("nccl", op, i, t.dtype(), allow_int64);
  }
}

}  // namespace tandem::parallel
