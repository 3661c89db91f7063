#include "data/dataset.h"

#include "engine/error.h"
#include "engine/ops/factory.h"

namespace tandem::data {
namespace {

Shape with_batch_dim(int64_t count, const Shape& example) {
  Shape shape{count};
  shape.insert(shape.end(), example.begin(), example.end());
  return shape;
}

// What a batch row needs of an example tensor; "input" or "target" in the message.
void check_fits(const Tensor& value, const Shape& shape, DType dtype, int64_t index,
                const char* what) {
  TANDEM_CHECK(value.defined() && value.device().is_cpu() && value.shape() == shape &&
                   value.dtype() == dtype,
               "[Dataset] example ", index, "'s ", what,
               " is not a host tensor of the layout of "
               "example 0 (",
               dtype_name(dtype), ", ", shape_str(shape),
               "): a batch stacks examples of one shape and dtype");
}

}  // namespace

void check_index(const Dataset& dataset, int64_t index) {
  TANDEM_CHECK(index >= 0 && index < dataset.size(), "[make_batch] index ", index,
               " outside a data set of ", dataset.size());
}

ExampleLayout Dataset::layout() const {
  TANDEM_CHECK(size() >= 1, "[Dataset] an empty data set has no examples to batch");
  Generator generator = image_generator(0, 0);
  const Example first = get(0, generator);
  TANDEM_CHECK(first.input.defined() && first.target.defined(),
               "[Dataset] get(0) returned an example without an input or a target");
  return {first.input.shape(), first.input.dtype(), first.target.shape(), first.target.dtype()};
}

void Dataset::write_example(int64_t index, Generator& generator, Tensor& input,
                            Tensor& target) const {
  const Example example = get(index, generator);
  check_fits(example.input, input.shape(), input.dtype(), index, "input");
  check_fits(example.target, target.shape(), target.dtype(), index, "target");
  input.copy_(example.input);
  target.copy_(example.target);
}

Batch empty_batch(const ExampleLayout& layout, int64_t count, const HostAllocation& allocate) {
  const auto make = [&](const Shape& example, DType dtype) {
    const Shape shape = with_batch_dim(count, example);
    return allocate ? allocate(shape, dtype) : empty(shape, {.dtype = dtype});
  };
  return {make(layout.input_shape, layout.input_dtype),
          make(layout.target_shape, layout.target_dtype)};
}

Batch make_batch(const Dataset& dataset, const std::vector<int64_t>& indices,
                 uint64_t augmentation_seed) {
  Batch batch = empty_batch(dataset.layout(), static_cast<int64_t>(indices.size()));
  fill_batch(dataset, indices, augmentation_seed, batch);
  return batch;
}

void fill_batch(const Dataset& dataset, const std::vector<int64_t>& indices,
                uint64_t augmentation_seed, Batch& batch) {
  // The rows' shapes come from the batch (empty_batch of the data set's layout); each example
  // is checked against its row as it is written.
  const auto count = static_cast<int64_t>(indices.size());
  for (const Tensor* part : {&batch.images, &batch.labels}) {
    TANDEM_CHECK(part->defined() && part->device().is_cpu() && part->is_contiguous() &&
                     part->dim() >= 1 && part->size(0) == count,
                 "[fill_batch] needs contiguous host tensors of ", count, " rows");
  }
  const Shape input_shape(batch.images.shape().begin() + 1, batch.images.shape().end());
  const Shape target_shape(batch.labels.shape().begin() + 1, batch.labels.shape().end());
  for (int64_t i = 0; i < count; ++i) {
    const int64_t index = indices[static_cast<size_t>(i)];
    check_index(dataset, index);
    Generator generator =
        image_generator(augmentation_seed, index);  // Note [Augmentation per image]
    Tensor input = batch.images.slice(i, i + 1).view(input_shape);
    Tensor target = batch.labels.slice(i, i + 1).view(target_shape);
    dataset.write_example(index, generator, input, target);
  }
}

Generator image_generator(uint64_t augmentation_seed, int64_t index) {
  // SplitMix64's finaliser spreads neighbouring indices over unrelated Mersenne Twister seeds.
  uint64_t key = augmentation_seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(index) + 1);
  key = (key ^ (key >> 30)) * 0xBF58476D1CE4E5B9ull;
  key = (key ^ (key >> 27)) * 0x94D049BB133111EBull;
  return Generator(key ^ (key >> 31));
}

}  // namespace tandem::data
