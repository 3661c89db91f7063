# Finds cuDNN: CUDNN_FOUND, CUDNN_INCLUDE_DIR, CUDNN_LIBRARY, CUDNN_VERSION, target CUDNN::cudnn.
include(TandemFindNvidiaLibrary)
tandem_find_nvidia_library(NAME CUDNN WHEEL cudnn HEADER cudnn.h VERSION_HEADER cudnn_version.h
  LIBRARIES cudnn libcudnn.so.9 MACROS CUDNN_MAJOR CUDNN_MINOR CUDNN_PATCHLEVEL)
