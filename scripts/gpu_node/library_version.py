#!/usr/bin/env python3
"""The version a CUDA library file reports of itself, without a GPU: the CUDA runtime, cuBLAS,
cuBLASLt, cuDNN or NCCL (scripts/gpu_node.sh prints them and orders the loader path by them).

    library_version.py /usr/local/cuda/lib64/libcudart.so.13     # 13.0
    library_version.py site-packages/nvidia/cu13/lib/libcublasLt.so.13   # 13.1.0

Prints nothing and exits 1 for a file it cannot load or does not know.
"""
import ctypes
import os
import sys


def split(number, *divisors):
    """13010 with (1000, 10) -> 13.1: the libraries' packed version numbers."""
    parts = []
    for divisor in divisors:
        parts.append(number // divisor)
        number %= divisor
    return parts


def version(path):
    name = os.path.basename(path)
    library = ctypes.CDLL(path)
    value = ctypes.c_int()
    if name.startswith("libcudart."):
        if library.cudaRuntimeGetVersion(ctypes.byref(value)) != 0:
            return None
        return split(value.value, 1000, 10)
    if name.startswith("libcublasLt."):
        return split(library.cublasLtGetVersion(), 10000, 100, 1)
    if name.startswith("libcublas."):
        parts = []
        for kind in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            if library.cublasGetProperty(kind, ctypes.byref(value)) != 0:
                return None
            parts.append(value.value)
        return parts
    if name.startswith("libcudnn."):
        library.cudnnGetVersion.restype = ctypes.c_size_t
        return split(library.cudnnGetVersion(), 10000, 100, 1)
    if name.startswith("libnccl."):
        if library.ncclGetVersion(ctypes.byref(value)) != 0:
            return None
        return split(value.value, 10000, 100, 1)
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: library_version.py LIBRARY_FILE")
    try:
        parts = version(sys.argv[1])
    except (OSError, AttributeError):
        parts = None
    if parts is None:
        sys.exit(1)
    print(".".join(str(p) for p in parts))


if __name__ == "__main__":
    main()
