# Finds every dependency with find_package and reports it in the summary.

# --- CPU side (required)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Threads REQUIRED)
tandem_report("OpenMP" TRUE "${OpenMP_CXX_VERSION}")

# oneDNN: 3.2 from the prefix scripts/install_onednn.sh fills (any CMAKE_PREFIX_PATH first, as
# the GPU node's bundle is), or Debian's 2.6; each package accepts only its own major version.
if(NOT "$ENV{TANDEM_ONEDNN_PREFIX}" STREQUAL "")
  set(_tandem_onednn_prefix "$ENV{TANDEM_ONEDNN_PREFIX}")
elseif(NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
  set(_tandem_onednn_prefix "$ENV{XDG_CACHE_HOME}/tandem/onednn-3.2")
else()
  set(_tandem_onednn_prefix "$ENV{HOME}/.cache/tandem/onednn-3.2")
endif()
set(TANDEM_ONEDNN_PREFIX "${_tandem_onednn_prefix}" CACHE PATH
    "Where scripts/install_onednn.sh put oneDNN 3.2 (TANDEM_ONEDNN=3)")
if(TANDEM_ONEDNN STREQUAL "3")
  find_package(dnnl 3.2 CONFIG QUIET HINTS "${TANDEM_ONEDNN_PREFIX}")
  set(_tandem_onednn_hint "scripts/install_onednn.sh (oneDNN 3.2 from PyPI into ${TANDEM_ONEDNN_PREFIX}), or -DTANDEM_ONEDNN=2 for Debian's libdnnl-dev")
elseif(TANDEM_ONEDNN STREQUAL "2")
  find_package(dnnl 2.6 CONFIG QUIET)
  set(_tandem_onednn_hint "apt-get install libdnnl-dev")
else()
  message(FATAL_ERROR "TANDEM_ONEDNN is 3 (PyPI's oneDNN 3.2) or 2 (Debian's 2.6), not '${TANDEM_ONEDNN}'")
endif()
if(NOT dnnl_FOUND)
  tandem_report("oneDNN" FALSE "missing: ${_tandem_onednn_hint}")
  tandem_print_summary()
  message(FATAL_ERROR "oneDNN ${TANDEM_ONEDNN}.x (the CPU kernels for conv, batch-norm, pooling, GEMM) is required: ${_tandem_onednn_hint}")
endif()
tandem_report("oneDNN" TRUE "${dnnl_VERSION} (${dnnl_DIR})")

find_package(nlohmann_json CONFIG QUIET)
if(NOT nlohmann_json_FOUND)
  tandem_report("nlohmann-json" FALSE "missing: apt-get install nlohmann-json3-dev")
  tandem_print_summary()
  message(FATAL_ERROR "nlohmann-json (checkpoint headers) is required: apt-get install nlohmann-json3-dev")
endif()
tandem_report("nlohmann-json" TRUE "${nlohmann_json_VERSION}")

# Gloo: the CPU process group of DistributedDataParallel. Debian's package ships a CMake config
# (target `gloo`) with an imported RelWithDebInfo configuration only, which every build type uses.
find_package(Gloo CONFIG QUIET)
if(NOT Gloo_FOUND OR NOT TARGET gloo)
  tandem_report("Gloo" FALSE "missing: apt-get install libgloo-dev")
  tandem_print_summary()
  message(FATAL_ERROR "Gloo (the CPU process group for DistributedDataParallel) is required: apt-get install libgloo-dev")
endif()
tandem_report("Gloo" TRUE "${GLOO_VERSION}")

# OpenSSL's libcrypto: HMAC-SHA256 and random nonces for the rendezvous store's handshake
# (Note [Store handshake] in parallel/comm/rendezvous/store_auth.h), MD5 for the data files' check
# (Note [md5 stamps] in data/integrity.h).
find_package(OpenSSL QUIET COMPONENTS Crypto)
if(NOT OpenSSL_FOUND)
  tandem_report("OpenSSL" FALSE "missing: apt-get install libssl-dev")
  tandem_print_summary()
  message(FATAL_ERROR "OpenSSL's libcrypto (the rendezvous store's job token handshake, the data files' md5 check) is required: apt-get install libssl-dev")
endif()
# Debian's libssl-dev keeps openssl/configuration.h in the multiarch folder
# (include/x86_64-linux-gnu), which the compiler searches only under /usr. Unpacked into a
# private prefix (the GPU node's offline bundle), that folder must be named, or the compiler
# takes the system's copy, or none ("requested API level higher than the configured").
set(_tandem_openssl_arch_include "${OPENSSL_INCLUDE_DIR}/${CMAKE_LIBRARY_ARCHITECTURE}")
if(CMAKE_LIBRARY_ARCHITECTURE AND NOT OPENSSL_INCLUDE_DIR STREQUAL "/usr/include"
   AND EXISTS "${_tandem_openssl_arch_include}/openssl/configuration.h")
  set_property(TARGET OpenSSL::Crypto APPEND PROPERTY
    INTERFACE_INCLUDE_DIRECTORIES "${_tandem_openssl_arch_include}")
endif()
tandem_report("OpenSSL" TRUE "${OPENSSL_VERSION}")

find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  tandem_report("CLI11" FALSE "missing: apt-get install libcli11-dev")
  tandem_print_summary()
  message(FATAL_ERROR "CLI11 (command-line flags of the apps) is required: apt-get install libcli11-dev")
endif()
tandem_report("CLI11" TRUE "${CLI11_VERSION}")

if(TANDEM_BUILD_TESTS)
  find_package(GTest CONFIG QUIET)
  if(NOT GTest_FOUND)
    find_package(GTest QUIET)
  endif()
  if(GTest_FOUND)
    tandem_report("GoogleTest" TRUE "${GTest_VERSION}")
  else()
    tandem_report("GoogleTest" FALSE "missing (tests off): apt-get install libgtest-dev")
    set(TANDEM_BUILD_TESTS OFF)
  endif()
endif()

if(TANDEM_BUILD_BENCH)
  find_package(benchmark CONFIG QUIET)
  if(benchmark_FOUND)
    tandem_report("Google Benchmark" TRUE "${benchmark_VERSION}")
  else()
    tandem_report("Google Benchmark" FALSE "missing (microbench/ off): apt-get install libbenchmark-dev")
    set(TANDEM_BUILD_BENCH OFF)
  endif()
endif()

# --- MPI (optional): the mpi process group
include(TandemMpi)

# --- CUDA side (optional)
include(TandemCuda)
