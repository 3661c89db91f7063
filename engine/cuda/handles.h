#pragma once
/// cuBLAS and cuDNN handles. A handle must not be used by two threads at once, and creating
/// one costs milliseconds, so each thread leases one handle per device from a pool on first
/// use and gives it back when the thread ends (Note [Handle pools] in handles.cpp). The handle
/// returned is bound to the calling thread's current stream of that device.

#include <cublas_v2.h>
#include <cudnn.h>

namespace tandem::cuda {

/// The calling thread's cuBLAS handle for `device`, set to its current stream. The caller makes
/// `device` current (DeviceGuard).
cublasHandle_t cublas_handle(int device);

/// The calling thread's cuDNN handle for `device`, set to its current stream.
cudnnHandle_t cudnn_handle(int device);

}  // namespace tandem::cuda
