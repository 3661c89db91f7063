#pragma once
/// What the DataLoader loads: a map-style data set, as PyTorch's torch.utils.data.Dataset (and
/// libtorch's datasets::Dataset): a size, and example i as an input tensor and a target tensor.
/// The loader stacks examples into batches (collation), in worker threads, in the order of its
/// sampler (Note [Loader determinism] in data_loader.h).
///
///   class Squares final : public data::Dataset {
///    public:
///     int64_t size() const override { return 1000; }
///     data::Example get(int64_t i, Generator&) const override {
///       return {from_vector<float>({float(i)}, {1}), from_vector<int64_t>({i * i % 7}, {})};
///     }
///   };
///   data::DataLoader loader(std::make_shared<Squares>(), sampler, {.batch_size = 32});
///
/// This header is the interface alone and includes only the engine; CIFAR-10 is one data set
/// beneath it, CifarImages (cifar10.h): its images through the transforms.

#include <functional>
#include <memory>
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"

namespace tandem::data {

/// One example: host tensors; every example of a data set has the same shapes and dtypes.
struct Example {
  Tensor input;   ///< e.g. (3, 32, 32) float32
  Tensor target;  ///< e.g. () int64, a class
};

/// The shapes and dtypes every example of a data set has; a batch adds the leading dimension.
struct ExampleLayout {
  Shape input_shape;
  DType input_dtype = DType::Float32;
  Shape target_shape;
  DType target_dtype = DType::Int64;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  /// Example `index`, 0 <= index < size(). Random augmentation draws from `generator` only:
  /// the loader seeds it from (seed, epoch, index) alone (Note [Augmentation per image]), so a
  /// run is the same for any number of workers and ranks. Called from several threads at once.
  virtual Example get(int64_t index, Generator& generator) const = 0;

  /// The layout of every example. The default reads it from get(0).
  virtual ExampleLayout layout() const;
  /// Writes example `index` into `input` and `target`: rows of a batch (contiguous host views
  /// of layout()'s shapes and dtypes). The default copies get()'s tensors in; a data set that
  /// can build its example in place overrides it and saves an allocation and a copy each.
  virtual void write_example(int64_t index, Generator& generator, Tensor& input,
                             Tensor& target) const;
};

/// Throws "[make_batch] index 12 outside a data set of 10" unless 0 <= index < dataset.size():
/// what a write_example() of one's own checks before it writes.
void check_index(const Dataset& dataset, int64_t index);

/// The generator that augments example `index` of a data set under `augmentation_seed` (one per
/// epoch: DataLoader derives it from its seed and the epoch). Note [Augmentation per image]: an
/// image's crop and flip (any example's random draws) depend on the seed, the epoch and the
/// example alone, not on the batch, the rank or the worker that builds it, so one process,
/// DataParallel and DDP with any number of ranks train on the same augmented global batches, and
/// no two ranks share their draws.
Generator image_generator(uint64_t augmentation_seed, int64_t index);

/// A batch: every example's input stacked into `images` (B, …input shape) and its target into
/// `labels` (B, …target shape). The names are CIFAR-10's, the common case.
struct Batch {
  Tensor images;
  Tensor labels;
};

/// Allocates a host tensor; DataLoader passes pinned staging memory for a CUDA upload.
using HostAllocation = std::function<Tensor(const Shape& shape, DType dtype)>;

/// Host tensors for a batch of `count` examples of `layout`, from `allocate` or, when it is
/// empty, empty().
Batch empty_batch(const ExampleLayout& layout, int64_t count, const HostAllocation& allocate = {});

/// Builds the batch of examples `indices` in new host tensors; example i is drawn with
/// image_generator(augmentation_seed, indices[i]) (Note [Augmentation per image]).
Batch make_batch(const Dataset& dataset, const std::vector<int64_t>& indices,
                 uint64_t augmentation_seed);
/// The same into `out`: contiguous host tensors of the batch's shapes, allocated by the caller.
void fill_batch(const Dataset& dataset, const std::vector<int64_t>& indices,
                uint64_t augmentation_seed, Batch& out);

}  // namespace tandem::data
