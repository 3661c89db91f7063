# Decides whether the CUDA backend is built (TANDEM_CUDA=AUTO|ON|OFF), enables the CUDA
# language when it is, and reports what was found. Sets TANDEM_WITH_CUDA, also as a cache entry
# (scripts/train.sh reads it from CMakeCache.txt), on every path so a reconfigure never keeps a
# stale value.

macro(tandem_set_with_cuda value)
  set(TANDEM_WITH_CUDA ${value})
  set(TANDEM_WITH_CUDA ${value} CACHE INTERNAL "Whether the CUDA backend is built (scripts/train.sh reads it)")
endmacro()

tandem_set_with_cuda(OFF)
string(TOUPPER "${TANDEM_CUDA}" _tandem_cuda_mode)
if(NOT _tandem_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TANDEM_CUDA must be AUTO, ON or OFF, got '${TANDEM_CUDA}'")
endif()

if(_tandem_cuda_mode STREQUAL "OFF")
  tandem_report("CUDA backend" FALSE "off (TANDEM_CUDA=OFF)")
  return()
endif()

include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "nvcc")
endif()
check_language(CUDA)
find_package(CUDAToolkit QUIET)
find_package(CUDNN QUIET)
find_package(NCCL QUIET)

# NVIDIA's wheels of cuDNN and NCCL are built per CUDA major (nvidia-cudnn-cu13 for CUDA 13):
# the hints name the toolkit's. At run time the CUDA backend checks that the libraries loaded
# suit it (engine/cuda/runtime/version_check.h, check_nccl_version()).
set(_tandem_cu "cu13")
if(CUDAToolkit_VERSION_MAJOR)
  set(_tandem_cu "cu${CUDAToolkit_VERSION_MAJOR}")
endif()

set(_missing "")
if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
  tandem_report("nvcc + CUDA toolkit" TRUE "${CUDAToolkit_VERSION} (${CMAKE_CUDA_COMPILER})")
else()
  tandem_report("nvcc + CUDA toolkit" FALSE "not found: install the CUDA toolkit or set CUDA_HOME")
  list(APPEND _missing "CUDA toolkit")
endif()
if(TARGET CUDA::cublas)
  tandem_report("cuBLAS" TRUE "${CUDAToolkit_LIBRARY_DIR}")
else()
  tandem_report("cuBLAS" FALSE "not found: comes with the CUDA toolkit")
  list(APPEND _missing "cuBLAS")
endif()
# cuDNN from a wheel for another CUDA major configures fine and then fails at run time (it was
# built against that major's runtime and cuBLAS): refuse it here. (NCCL carries its own CUDA runtime, so its wheel's
# major does not matter; check_nccl_version() compares its version with the headers at run time.)
if(CUDNN_WHEEL_CUDA_MAJOR AND CUDAToolkit_VERSION_MAJOR
   AND NOT CUDNN_WHEEL_CUDA_MAJOR STREQUAL CUDAToolkit_VERSION_MAJOR)
  set(CUDNN_FOUND FALSE)
  set(_tandem_cudnn_why "${CUDNN_LIBRARY} is from the nvidia-cudnn-cu${CUDNN_WHEEL_CUDA_MAJOR} wheel, built for CUDA ${CUDNN_WHEEL_CUDA_MAJOR}, but the toolkit is CUDA ${CUDAToolkit_VERSION_MAJOR}: pip install nvidia-cudnn-${_tandem_cu} (or set CUDNN_ROOT) and configure a fresh build directory")
endif()

if(CUDNN_FOUND AND CUDNN_VERSION VERSION_GREATER_EQUAL 9)
  tandem_report("cuDNN" TRUE "${CUDNN_VERSION} (${CUDNN_LIBRARY})")
elseif(_tandem_cudnn_why)
  tandem_report("cuDNN" FALSE "${_tandem_cudnn_why}")
  list(APPEND _missing "cuDNN")
else()
  tandem_report("cuDNN" FALSE "9.x not found: set CUDNN_ROOT, or install cuDNN 9 (pip install nvidia-cudnn-${_tandem_cu})")
  list(APPEND _missing "cuDNN")
endif()
if(NCCL_FOUND)
  tandem_report("NCCL" TRUE "${NCCL_VERSION} (${NCCL_LIBRARY})")
else()
  tandem_report("NCCL" FALSE "2.x not found: set NCCL_ROOT, or install NCCL (pip install nvidia-nccl-${_tandem_cu})")
  list(APPEND _missing "NCCL")
endif()

if(_missing)
  if(_tandem_cuda_mode STREQUAL "ON")
    tandem_print_summary()
    message(FATAL_ERROR "TANDEM_CUDA=ON but these are missing: ${_missing}. Install them (the ✗ lines "
      "above say how), point CUDA_HOME / CUDNN_ROOT / NCCL_ROOT at them, or configure with "
      "-DTANDEM_CUDA=AUTO (CUDA when found) or -DTANDEM_CUDA=OFF (CPU only).")
  endif()
  tandem_report("CUDA backend" FALSE "off: missing ${_missing}")
  return()
endif()

# A100 (80) and H100 (90) unless the user says otherwise: -DCMAKE_CUDA_ARCHITECTURES=86, "native"...
# Set before enable_language, which would otherwise pick nvcc's default.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(CMAKE_CUDA_ARCHITECTURES 80 90 CACHE STRING "GPU architectures the CUDA kernels are compiled for")
endif()
if(NOT CMAKE_CUDA_HOST_COMPILER)
  set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER} CACHE FILEPATH "Host compiler for nvcc")
endif()
enable_language(CUDA)
# The engine links CUDA::cudart (shared: one runtime in the process, with cuBLAS and cuDNN)
# itself. CMake's own runtime handling would add a bare -lcudart -lcudadevrt to every C++
# program linking the engine, without the directory to find them in. (Set after
# enable_language, whose compiler check needs the default.)
set(CMAKE_CUDA_RUNTIME_LIBRARY None)
# .cu files are C++20 like the rest (CMake takes the CUDA dialect from CXX_STANDARD). CMake 3.25
# does not know nvcc's flag for it yet; nvcc 12+ accepts -std=c++20.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>")
# The host compiler's own include dirs (/usr/include) must not reach nvcc as -isystem (oneDNN's
# imported target names /usr/include): libstdc++'s <cmath> then fails on #include_next <math.h>.
list(APPEND CMAKE_CUDA_IMPLICIT_INCLUDE_DIRECTORIES ${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES})

tandem_set_with_cuda(ON)
list(JOIN CMAKE_CUDA_ARCHITECTURES "," _tandem_archs)
tandem_report("CUDA backend" TRUE "on, kernels for CUDA architectures ${_tandem_archs} (GPU tests: ctest -L gpu)")
