#include "engine/ops/factory.h"

#include <cstring>

#include "engine/backend/backend.h"
#include "engine/profiler.h"
#include "engine/tensor_impl.h"

namespace tandem {

Tensor empty(const Shape& shape, const TensorOptions& options) {
  const profiler::RecordScope scope("empty");  // the allocator's share
  for (int64_t size : shape) {
    TANDEM_CHECK(size >= 0, "[empty] negative size in shape ", shape_str(shape));
  }
  const size_t nbytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(options.dtype);
  Allocator& allocator = runtime_for(options.device).allocator(options.device);
  auto storage = std::make_shared<Storage>(nbytes, options.device, allocator);
  Tensor tensor(std::make_shared<TensorImpl>(
      std::move(storage), shape, strides_for(shape, options.memory_format), 0, options.dtype));
  if (options.requires_grad) tensor.set_requires_grad(true);
  return tensor;
}

Tensor full(const Shape& shape, double value, const TensorOptions& options) {
  TensorOptions plain = options;
  plain.requires_grad = false;
  Tensor tensor = empty(shape, plain);
  tensor.fill_(value);
  if (options.requires_grad) tensor.set_requires_grad(true);
  return tensor;
}

Tensor empty_like(const Tensor& like) {
  return empty(like.shape(), options_like(like));
}

Tensor zeros_like(const Tensor& like) {
  return zeros(like.shape(), options_like(like));
}

TensorOptions options_like(const Tensor& like) {
  return {.dtype = like.dtype(), .device = like.device(), .memory_format = like.memory_format()};
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, const TensorOptions& options) {
  const DType dtype = DTypeOf<T>::value;
  TANDEM_CHECK(options.dtype == dtype || options.dtype == TensorOptions{}.dtype,
               "[from_vector] values are ", dtype_name(dtype), " but options ask for ",
               dtype_name(options.dtype));
  TANDEM_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), "[from_vector] ",
               values.size(), " values for shape ", shape_str(shape));
  Tensor host = empty(shape, {.dtype = dtype, .device = Device::cpu()});
  if (!values.empty()) std::memcpy(host.data_ptr(), values.data(), values.size() * sizeof(T));
  Tensor tensor = options.device == Device::cpu() ? host : host.to(options.device);
  if (options.requires_grad) tensor.set_requires_grad(true);
  return tensor;
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, const TensorOptions&);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&,
                                     const TensorOptions&);
template Tensor from_vector<uint8_t>(const std::vector<uint8_t>&, const Shape&,
                                     const TensorOptions&);
template Tensor from_vector<BFloat16>(const std::vector<BFloat16>&, const Shape&,
                                      const TensorOptions&);
template Tensor from_vector<Float16>(const std::vector<Float16>&, const Shape&,
                                     const TensorOptions&);

Tensor randn(const Shape& shape, Generator& generator, const TensorOptions& options, float mean,
             float stddev) {
  TANDEM_CHECK(options.dtype == DType::Float32, "[randn] only float32 is supported");
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (float& v : values) v = mean + stddev * generator.normal();
  return from_vector(values, shape, options);
}

Tensor uniform(const Shape& shape, float low, float high, Generator& generator,
               const TensorOptions& options) {
  TANDEM_CHECK(options.dtype == DType::Float32, "[uniform] only float32 is supported");
  TANDEM_CHECK(low <= high, "[uniform] low ", low, " > high ", high);
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (float& v : values) v = low + (high - low) * generator.uniform();
  return from_vector(values, shape, options);
}

}  // namespace tandem
