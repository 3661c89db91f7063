# What `cmake --install` puts under the prefix, so that another CMake project can write
#
#   find_package(Tandem CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE Tandem::tandem)
#
# lib/                 libtandem_{engine,nn,data,comm,parallel}.a
# lib/cmake/Tandem/    TandemConfig.cmake (+ version file, exported targets; FindCUDNN/FindNCCL
#                      with the CUDA backend)
# include/tandem/      the public headers: engine/tensor.h, nn/resnet.h, ... (Note [Installed headers])
# bin/                 tandem-run, train_cifar, bench_cifar, bench_collectives
#
# docs/library.md is the user's guide; examples/ddp_train is built against the installed package
# by the test InstallExample.FindPackageBuildsAndTrains.
include(CMakePackageConfigHelpers)

set(TANDEM_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/Tandem")
set(TANDEM_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/tandem")

# Note [Installed headers]: the code includes its headers by folder ("engine/tensor.h",
# "parallel/distributed_data_parallel.h"), and a user writes the same lines. Those folder names
# are too common for a prefix's include/ (/usr/local/include/data/...), so they go one level down,
# into include/tandem/, which is the include directory the exported targets carry.
# Public are the headers of the five libraries except the backends' insides: engine/cpu,
# engine/no_cuda and engine/cuda (they include oneDNN, cuDNN, kernel bodies), NCCL's insides
# parallel/comm/nccl/nccl_{api,work,call}.h, the Gloo group's gloo/gloo_{waiters,reduce_scatter}.h
# and the MPI group's mpi/mpi_{engine,group,datatypes}.h (they include <mpi.h>). The launcher's
# library (parallel/launch/) is the programs' own and is not installed.
# The CUDA backend adds its runtime headers (devices, streams, allocators, CUDA_CHECK), which name
# only CUDA's runtime and cuBLAS types: the engine links both
# publicly for them. Every header is found by a glob, so a new one is installed without a line
# here; the install test checks that whatever an installed header includes was installed too.
function(tandem_public_headers target)
  cmake_parse_arguments(arg "" "" "GLOBS;EXTRA" ${ARGN})
  list(TRANSFORM arg_GLOBS PREPEND "${PROJECT_SOURCE_DIR}/")
  file(GLOB headers CONFIGURE_DEPENDS RELATIVE "${PROJECT_SOURCE_DIR}" ${arg_GLOBS})
  list(FILTER headers EXCLUDE REGEX
       "^engine/(cpu|cuda|no_cuda)/|^parallel/comm/(nccl/nccl_(api|work|call)|gloo/gloo_(waiters|reduce_scatter)|mpi/mpi_(engine|group|datatypes))\\.h$")
  list(APPEND headers ${arg_EXTRA})
  list(TRANSFORM headers PREPEND "${PROJECT_SOURCE_DIR}/")
  target_sources(${target} PUBLIC FILE_SET HEADERS BASE_DIRS "${PROJECT_SOURCE_DIR}" FILES ${headers})
endfunction()

set(_tandem_cuda_runtime_headers "")
if(TANDEM_WITH_CUDA)
  set(_tandem_cuda_runtime_headers engine/cuda/runtime/caching_allocator.h engine/cuda/runtime/cuda_check.h
      engine/cuda/runtime/device.h engine/cuda/runtime/pinned_allocator.h engine/cuda/runtime/stream.h)
endif()
tandem_public_headers(tandem_engine GLOBS engine/*.h engine/autograd/*.h engine/backend/*.h engine/ops/*.h
                      EXTRA ${_tandem_cuda_runtime_headers})
tandem_public_headers(tandem_nn GLOBS nn/*.h)
tandem_public_headers(tandem_data GLOBS data/*.h)
tandem_public_headers(tandem_comm GLOBS parallel/comm/*.h parallel/comm/gloo/*.h parallel/comm/nccl/*.h
                      parallel/comm/mpi/*.h parallel/comm/rendezvous/*.h)
tandem_public_headers(tandem_parallel GLOBS parallel/*.h parallel/zero/*.h)

# Tandem::engine, Tandem::nn, ... both installed and in this build (ALIAS), so a project that
# adds Tandem with add_subdirectory or FetchContent links the same names; Tandem::tandem is all
# five.
add_library(tandem INTERFACE)
target_link_libraries(tandem INTERFACE tandem_engine tandem_nn tandem_data tandem_comm
                      tandem_parallel)
add_library(Tandem::tandem ALIAS tandem)
foreach(_tandem_library engine nn data comm parallel)
  set_target_properties(tandem_${_tandem_library} PROPERTIES EXPORT_NAME ${_tandem_library})
  add_library(Tandem::${_tandem_library} ALIAS tandem_${_tandem_library})
endforeach()

install(TARGETS tandem tandem_engine tandem_nn tandem_data tandem_comm tandem_parallel
        EXPORT TandemTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        FILE_SET HEADERS DESTINATION "${TANDEM_INSTALL_INCLUDEDIR}"
        INCLUDES DESTINATION "${TANDEM_INSTALL_INCLUDEDIR}")
install(EXPORT TandemTargets NAMESPACE Tandem:: DESTINATION "${TANDEM_INSTALL_CMAKEDIR}")

# The package. The libraries are static, so what they link privately (oneDNN, Gloo, OpenMP, and
# cuDNN and NCCL with the CUDA backend) is linked into the user's program: TandemConfig.cmake finds
# each again (Note [Dependencies of the package] there). cuDNN and NCCL have no CMake package of
# their own; the project's find modules go beside the config, with where this build found them as
# the first place to look.
set(TANDEM_CUDNN_ROOT "")
set(TANDEM_NCCL_ROOT "")
set(TANDEM_CUDA_TOOLKIT_ROOT "")
if(TANDEM_WITH_CUDA)
  get_filename_component(TANDEM_CUDNN_ROOT "${CUDNN_INCLUDE_DIR}" DIRECTORY)
  get_filename_component(TANDEM_NCCL_ROOT "${NCCL_INCLUDE_DIR}" DIRECTORY)
  get_filename_component(TANDEM_CUDA_TOOLKIT_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
  install(FILES "${PROJECT_SOURCE_DIR}/cmake/FindCUDNN.cmake" "${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake"
                "${PROJECT_SOURCE_DIR}/cmake/TandemFindNvidiaLibrary.cmake"
          DESTINATION "${TANDEM_INSTALL_CMAKEDIR}")
endif()
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/TandemConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/TandemConfig.cmake" INSTALL_DESTINATION "${TANDEM_INSTALL_CMAKEDIR}")
# 0.x: a minor release may change the API, so 0.1 is satisfied by 0.1.y only.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/TandemConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/TandemConfig.cmake" "${PROJECT_BINARY_DIR}/TandemConfigVersion.cmake"
        DESTINATION "${TANDEM_INSTALL_CMAKEDIR}")

# The programs. They find nothing relative to themselves: train_cifar and bench_cifar start their
# own workers through /proc/self/exe, tandem-run runs the command it is given (found on PATH).
install(TARGETS tandem-run train_cifar bench_cifar bench_collectives
        RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
