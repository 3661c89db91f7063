#include "parallel/distributed_grad_scaler.h"

namespace tandem::parallel {

// Note [One verdict for every rank]. wait() is enough before the host reads the flag: on NCCL it
// orders the current stream after the all-reduce, and the read copies on that stream.
void DistributedGradScaler::agree_found_inf(Tensor& found_inf) {
  found_inf = found_inf.to(group_.tensor_device());  // a rank without gradients has it on the CPU
  try {
    group_.allreduce({found_inf}, ReduceOp::Max)->wait();
  } catch (const Error& e) {
    TANDEM_FAIL("[GradScaler] all-reduce of the found-inf flag failed: ", e.message());
  }
  ++found_inf_allreduces_;
}

}  // namespace tandem::parallel
