#include "engine/cuda/activation_type.h"

#include "engine/error.h"

namespace tandem::cuda {

DType activation_type(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (first == nullptr) {
      first = t;
      TANDEM_CHECK(t->dtype() == DType::Float32 || t->dtype() == DType::BFloat16, "[", op,
                   "] takes float32 or bfloat16 activations on CUDA, got ", dtype_name(t->dtype()));
    }
    TANDEM_CHECK(t->dtype() == first->dtype(), "[", op, "] activations of one dtype, got ",
                 dtype_name(first->dtype()), " and ", dtype_name(t->dtype()));
  }
  TANDEM_CHECK(first != nullptr, "[", op, "] no tensor");
  return first->dtype();
}

}  // namespace tandem::cuda
