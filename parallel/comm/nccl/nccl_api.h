#pragma once
/// NcclApi: the NCCL calls the NCCL process group makes, as an interface, so that its state
/// machine (non-blocking calls polled to completion, async errors, timeouts, the abort order,
/// shutdown) runs in unit tests against a scripted fake (tests/parallel/comm/nccl/fake_nccl.h) on
/// machines without a GPU or libnccl. real_nccl_api() calls libnccl; it is the only definition
/// in a Tandem build. Only NCCL code includes this header (it names NCCL's types).

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <string>

#include "engine/error.h"

namespace tandem::parallel {

class NcclApi {
 public:
  virtual ~NcclApi() = default;

  virtual ncclResult_t get_unique_id(ncclUniqueId* id) = 0;
  /// ncclCommInitRankConfig; the group asks for a non-blocking communicator.
  virtual ncclResult_t comm_init_rank_config(ncclComm_t* comm, int size, ncclUniqueId id, int rank,
                                             ncclConfig_t* config) = 0;

  // --- collectives, queued between group_start() and group_end()
  virtual ncclResult_t all_reduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t broadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                                 int root, ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t all_gather(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t reduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) = 0;
  /// `count` is each rank's share: recv holds count elements, send size × count.
  virtual ncclResult_t reduce_scatter(const void* send, void* recv, size_t count,
                                      ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream) = 0;
  virtual ncclResult_t send(const void* buffer, size_t count, ncclDataType_t type, int peer,
                            ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t recv(void* buffer, size_t count, ncclDataType_t type, int peer,
                            ncclComm_t comm, cudaStream_t stream) = 0;
  virtual ncclResult_t group_start() = 0;
  virtual ncclResult_t group_end() = 0;

  // --- the communicator's state and end
  /// `*state`: ncclInProgress while a non-blocking call goes on, then its result; an error
  /// once a peer died or the network failed.
  virtual ncclResult_t comm_get_async_error(ncclComm_t comm, ncclResult_t* state) = 0;
  virtual ncclResult_t comm_abort(ncclComm_t comm) = 0;
  virtual ncclResult_t comm_finalize(ncclComm_t comm) = 0;
  virtual ncclResult_t comm_destroy(ncclComm_t comm) = 0;

  // --- messages and version
  virtual const char* error_string(ncclResult_t result) = 0;
  /// NCCL's detail on the last error (which rank, which socket); may be null or empty.
  virtual const char* last_error(ncclComm_t comm) = 0;
  /// The library's version code, e.g. 22805 for 2.28.5.
  virtual ncclResult_t get_version(int* version) = 0;

  /// "NCCL error 6: remote process exited or there was a network error (<NCCL's detail>)".
  std::string message(ncclResult_t result, ncclComm_t comm) {
    const char* last = last_error(comm);
    return detail::concat("NCCL error ", static_cast<int>(result), ": ", error_string(result),
                          last != nullptr && last[0] != '\0' ? std::string(" (") + last + ")" : "");
  }
};

/// libnccl itself.
NcclApi& real_nccl_api();

}  // namespace tandem::parallel
