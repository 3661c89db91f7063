#pragma once
/// check_cuda_major(): fails in one line when an NVIDIA library loaded at run time was built for
/// another CUDA major version than the toolkit Tandem was built with (e.g. cuDNN from a -cu12
/// wheel beside a CUDA 13 build), instead of failing later in an unrelated call. Pure, no CUDA
/// headers, so it is unit-tested anywhere; the CUDA backend calls it at a library's first use:
/// check_cuda_major("cudnn", cudnnGetCudartVersion(), CUDART_VERSION).

#include <string>

#include "engine/error.h"

namespace tandem::cuda {

/// `library_cudart` and `toolkit_cudart` are CUDA runtime version codes (1000 * major + 10 *
/// minor: 13000 for 13.0). Throws "[cudnn] libcudnn was built for CUDA 12.8, but Tandem for
/// CUDA 13.0: install cudnn for CUDA 13 (pip install nvidia-cudnn-cu13) ..." when the majors
/// differ.
inline void check_cuda_major(const std::string& library, int library_cudart, int toolkit_cudart) {
  const int major = toolkit_cudart / 1000;
  const auto text = [](int code) {
    return ::tandem::detail::concat(code / 1000, ".", code % 1000 / 10);
  };
  TANDEM_CHECK(library_cudart / 1000 == major, "[", library, "] lib", library,
               " was built for CUDA ", text(library_cudart), ", but Tandem for CUDA ",
               text(toolkit_cudart), ": install ", library, " for CUDA ", major,
               " (pip install nvidia-", library, "-cu", major,
               ") and put it first on the library path (LD_LIBRARY_PATH)");
}

}  // namespace tandem::cuda
