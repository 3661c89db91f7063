// NcclApi on libnccl. The only file that calls NCCL's functions: nccl_process_group.cpp goes
// through NcclApi, so that tests can script it (nccl_factory.cpp joins the two).
#include "parallel/comm/nccl/nccl_api.h"

namespace tandem::parallel {
namespace {

class RealNcclApi final : public NcclApi {
 public:
  ncclResult_t get_unique_id(ncclUniqueId* id) override { return ncclGetUniqueId(id); }
  ncclResult_t comm_init_rank_config(ncclComm_t* comm, int size, ncclUniqueId id, int rank,
                                     ncclConfig_t* config) override {
    return ncclCommInitRankConfig(comm, size, id, rank, config);
  }
  ncclResult_t all_reduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                          ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) override {
    return ncclAllReduce(send, recv, count, type, op, comm, stream);
  }
  ncclResult_t broadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                         ncclComm_t comm, cudaStream_t stream) override {
    return ncclBroadcast(send, recv, count, type, root, comm, stream);
  }
  ncclResult_t all_gather(const void* send, void* recv, size_t count, ncclDataType_t type,
                          ncclComm_t comm, cudaStream_t stream) override {
    return ncclAllGather(send, recv, count, type, comm, stream);
  }
  ncclResult_t reduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                      ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) override {
    return ncclReduce(send, recv, count, type, op, root, comm, stream);
  }
  ncclResult_t reduce_scatter(const void* send, void* recv, size_t count, ncclDataType_t type,
                              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) override {
    return ncclReduceScatter(send, recv, count, type, op, comm, stream);
  }
  ncclResult_t send(const void* buffer, size_t count, ncclDataType_t type, int peer,
                    ncclComm_t comm, cudaStream_t stream) override {
    return ncclSend(buffer, count, type, peer, comm, stream);
  }
  ncclResult_t recv(void* buffer, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                    cudaStream_t stream) override {
    return ncclRecv(buffer, count, type, peer, comm, stream);
  }
  ncclResult_t group_start() override { return ncclGroupStart(); }
  ncclResult_t group_end() override { return ncclGroupEnd(); }
  ncclResult_t comm_get_async_error(ncclComm_t comm, ncclResult_t* state) override {
    return ncclCommGetAsyncError(comm, state);
  }
  ncclResult_t comm_abort(ncclComm_t comm) override { return ncclCommAbort(comm); }
  ncclResult_t comm_finalize(ncclComm_t comm) override { return ncclCommFinalize(comm); }
  ncclResult_t comm_destroy(ncclComm_t comm) override { return ncclCommDestroy(comm); }
  const char* error_string(ncclResult_t result) override { return ncclGetErrorString(result); }
  const char* last_error(ncclComm_t comm) override { return ncclGetLastError(comm); }
  ncclResult_t get_version(int* version) override { return ncclGetVersion(version); }
};

}  // namespace

NcclApi& real_nccl_api() {
  static RealNcclApi api;
  return api;
}

}  // namespace tandem::parallel
