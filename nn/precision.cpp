#include "nn/precision.h"

namespace tandem::nn {

const char* precision_name(Precision precision) {
  return precision == Precision::BFloat16 ? "bf16" : "fp32";
}

DType compute_dtype(Precision precision) {
  return precision == Precision::BFloat16 ? DType::BFloat16 : DType::Float32;
}

}  // namespace tandem::nn
