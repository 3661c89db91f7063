#pragma once
/// Argument checks shared by the op front-ends. Each names the op so that the
/// error reads "[conv2d] weight has 3 dims, expected 4".

#include <initializer_list>

#include "engine/tensor.h"

namespace tandem::ops {

void check_defined(const char* op, const char* name, const Tensor& t);
void check_dtype(const char* op, const char* name, const Tensor& t, DType dtype);
/// An activation under mixed precision: float32 or bfloat16 (Note [bfloat16 activations] in
/// engine/backend/backend.h lists the ops that take bfloat16).
void check_float_activation(const char* op, const char* name, const Tensor& t);
/// b has a's dtype: the ops that take bfloat16 never promote a mix of dtypes silently.
void check_same_dtype(const char* op, const char* a_name, const Tensor& a, const char* b_name,
                      const Tensor& b);
void check_dim(const char* op, const char* name, const Tensor& t, int64_t dim);
void check_shape(const char* op, const char* name, const Tensor& t, const Shape& expected);
/// All defined tensors must live on the first one's device.
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);

}  // namespace tandem::ops
