#pragma once
/// cuBLAS, loaded on first use (Note [Lazy cuBLAS]).
///
/// Note [Lazy cuBLAS]: a program linked against libcublas maps and relocates it and libcublasLt
/// when it starts, about 150 MiB of resident memory in every process, with a GPU or without one,
/// although GEMM is cuBLAS's only use here (a ResNet's fc layer). So the engine does not link it:
/// the first call of cublas() loads the library file CMake found (else the soname, from the
/// loader's search path) and resolves the few functions the backend calls. cuDNN 9 does the same
/// with its own sub-libraries.

#include <cublas_v2.h>

namespace tandem::cuda {

/// cublasGemmEx with a cublasComputeType_t (C++ code also sees an inline overload taking the old
/// cudaDataType compute type, so decltype(&cublasGemmEx) would be ambiguous).
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void*, const void*, cudaDataType, int,
                                        const void*, cudaDataType, int, const void*, void*,
                                        cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

struct CublasLibrary {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm_v2) sgemm;
  CublasGemmEx gemm_ex;  ///< bfloat16 GEMM (Note [bfloat16 activations])
  decltype(&cublasGetStatusName) status_name;
  decltype(&cublasGetStatusString) status_string;
};

/// The loaded library (thread-safe; loads on the first call). Throws tandem::Error naming the
/// file and the loader's message when it cannot be loaded or lacks a function.
const CublasLibrary& cublas();

}  // namespace tandem::cuda
