#pragma once
/// NCCL_CHECK: an NCCL status as a tandem::Error with NCCL's message, the call and file:line.
/// Header-only so that only the code that uses NCCL (parallel/) links it.

#include <nccl.h>

#include <string>

#include "engine/error.h"

namespace tandem::cuda::detail {

[[noreturn]] inline void throw_nccl_error(ncclResult_t status, const char* call, const char* file,
                                          int line) {
  // ncclGetLastError() carries the detail (which rank, which socket) that the status string lacks.
  const char* last = ncclGetLastError(nullptr);
  const std::string detail =
      last != nullptr && last[0] != '\0' ? std::string(" (") + last + ")" : std::string();
  ::tandem::detail::throw_error(
      file, line, call,
      ::tandem::detail::concat("[nccl] NCCL error ", static_cast<int>(status), ": ",
                               ncclGetErrorString(status), detail));
}

}  // namespace tandem::cuda::detail

#define NCCL_CHECK(call)                                                                        \
  do {                                                                                          \
    const ncclResult_t tandem_nccl_status_ = (call);                                            \
    if (tandem_nccl_status_ != ncclSuccess) [[unlikely]] {                                      \
      ::tandem::cuda::detail::throw_nccl_error(tandem_nccl_status_, #call, __FILE__, __LINE__); \
    }                                                                                           \
  } while (false)
