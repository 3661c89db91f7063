#include "engine/dtype.h"

namespace tandem {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Int64: return 8;
    case DType::UInt8: return 1;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Int64: return "int64";
    case DType::UInt8: return "uint8";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
  }
  return "unknown";
}

}  // namespace tandem
