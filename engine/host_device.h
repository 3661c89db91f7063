#pragma once
/// TANDEM_HD marks a function that runs both on the host and in CUDA kernels. Headers that use it
/// (engine/half.h) stay plain C++ for the host compiler, so the core needs no CUDA to build.

#ifdef __CUDACC__
#define TANDEM_HD __host__ __device__
#else
#define TANDEM_HD
#endif
