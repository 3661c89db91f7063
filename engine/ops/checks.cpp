#include "engine/ops/checks.h"

namespace tandem::ops {

void check_defined(const char* op, const char* name, const Tensor& t) {
  TANDEM_CHECK(t.defined(), "[", op, "] ", name, " is an undefined tensor");
}

void check_dtype(const char* op, const char* name, const Tensor& t, DType dtype) {
  check_defined(op, name, t);
  // The 16-bit types hold data only (engine/dtype.h): say how to get something an op takes.
  const bool storage_only = t.dtype() == DType::BFloat16 || t.dtype() == DType::Float16;
  TANDEM_CHECK(t.dtype() == dtype, "[", op, "] ", name, " is ", dtype_name(t.dtype()),
               ", expected ", dtype_name(dtype),
               storage_only ? " (bfloat16 and float16 are storage types: .to(DType::Float32) "
                              "to compute on them)"
                            : "");
}

void check_float_activation(const char* op, const char* name, const Tensor& t) {
  check_defined(op, name, t);
  TANDEM_CHECK(t.dtype() == DType::Float32 || t.dtype() == DType::BFloat16, "[", op, "] ", name,
               " is ", dtype_name(t.dtype()), ", expected float32 or bfloat16");
}

void check_same_dtype(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                      const Tensor& b) {
  TANDEM_CHECK(a.dtype() == b.dtype(), "[", op, "] ", a_name, " is ", dtype_name(a.dtype()),
               " but ", b_name, " is ", dtype_name(b.dtype()),
               ": mixed dtypes are not promoted, cast one of them first");
}

void check_dim(const char* op, const char* name, const Tensor& t, int64_t dim) {
  check_defined(op, name, t);
  TANDEM_CHECK(t.dim() == dim, "[", op, "] ", name, " has ", t.dim(), " dims (shape ",
               shape_str(t.shape()), "), expected ", dim);
}

void check_shape(const char* op, const char* name, const Tensor& t, const Shape& expected) {
  check_defined(op, name, t);
  TANDEM_CHECK(t.shape() == expected, "[", op, "] ", name, " has shape ", shape_str(t.shape()),
               ", expected ", shape_str(expected));
}

void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (t == nullptr || !t->defined()) continue;
    if (first == nullptr) {
      first = t;
      continue;
    }
    TANDEM_CHECK(t->device() == first->device(), "[", op,
                 "] tensors on different devices: ", first->device(), " and ", t->device());
  }
}

}  // namespace tandem::ops
