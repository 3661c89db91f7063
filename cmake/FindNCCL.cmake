# Finds NCCL: NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY, NCCL_VERSION, target NCCL::nccl.
include(TandemFindNvidiaLibrary)
tandem_find_nvidia_library(NAME NCCL WHEEL nccl HEADER nccl.h VERSION_HEADER nccl.h
  LIBRARIES nccl libnccl.so.2 MACROS NCCL_MAJOR NCCL_MINOR NCCL_PATCH)
