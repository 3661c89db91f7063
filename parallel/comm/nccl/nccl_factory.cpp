// make_nccl_process_group: the NCCL group on the real libnccl (real_nccl_api()). Apart from both
// nccl_api.cpp and nccl_process_group.cpp so that neither includes the other's header (the fake
// NCCL's tests link the group with their own NcclApi instead of this file).
#include "parallel/comm/nccl/nccl_api.h"
#include "parallel/comm/nccl/nccl_process_group.h"

namespace tandem::parallel {

// The store is needed only to meet: the group keeps no reference to it.
std::shared_ptr<ProcessGroup> make_nccl_process_group(const std::shared_ptr<Store>& store, int rank,
                                                      int size, int device,
                                                      ProcessGroupOptions options) {
  return std::make_shared<NcclProcessGroup>(store, rank, size, device, std::move(options),
                                            real_nccl_api());
}

}  // namespace tandem::parallel
