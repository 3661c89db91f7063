#pragma once
/// What the oneDNN-backed kernels share: the CPU engine, plain (row-major)
/// memory descriptors for our tensors, a per-shape primitive cache and an
/// execute() that supplies the scratchpad.
///
/// Note [oneDNN scratchpad]: primitives are created with a user-managed
/// scratchpad and each call allocates its own, so two DataParallel replicas
/// may run the same cached primitive at the same time.
///
/// Note [oneDNN thread count]: with the OpenMP runtime a primitive fixes its
/// thread count when it is created (the calling thread's omp_get_max_threads())
/// and runs with that count whatever the caller sets later. So the cache sets
/// the OpenMP count from tandem::num_threads() before creating, and keys every
/// entry by that count: a replica running with 1 thread must not reuse a
/// primitive created for 8 (measured: it ran 8 OpenMP threads), nor the other
/// way round.

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/cpu/parallel.h"
#include "engine/tensor.h"

namespace tandem::cpu::dnnl_context {

dnnl::engine& engine();

/// oneDNN's name for a float dtype (float32, bfloat16, float16); throws for the others.
dnnl::memory::data_type data_type_of(DType dtype);
/// Descriptor of `shape` in its plain row-major layout (x, nc, nchw/oihw).
dnnl::memory::desc plain_desc(const Shape& shape, DType dtype = DType::Float32);
/// Descriptor of a dense `shape` in `format`: plain, or `nhwc` for ChannelsLast.
dnnl::memory::desc format_desc(const Shape& shape, MemoryFormat format,
                               DType dtype = DType::Float32);
/// Descriptor of `shape` that lets a primitive choose its layout (format_tag::any).
dnnl::memory::desc any_desc(const Shape& shape, DType dtype = DType::Float32);
/// The descriptor of the tensor's own layout: plain, nhwc, or its strides as they are.
dnnl::memory::desc desc_of(const Tensor& tensor);
/// A oneDNN memory over the tensor's data in its own layout (no copy).
dnnl::memory wrap(const Tensor& tensor);
dnnl::memory wrap(const dnnl::memory::desc& desc, const Tensor& tensor);

/// A memory in layout `desired` holding the tensor's values: the tensor itself when
/// its own layout already is `desired`, else a reordered copy owned by `holder`.
dnnl::memory as_layout(const Tensor& tensor, const dnnl::memory::desc& desired, Tensor& holder);
/// A memory in layout `layout` for a result that copy_to_plain() later moves into `tensor`.
dnnl::memory output_in_layout(const Tensor& tensor, const dnnl::memory::desc& layout,
                              Tensor& holder);
/// Reorders `result` into the tensor when they differ (no-op when it already is the tensor).
void copy_to_tensor(const dnnl::memory& result, const Tensor& tensor);

/// Bytes that as_layout() and copy_to_tensor() have reordered so far in this process (the
/// destination's size). Tests read it to check that channels-last layers run back to back
/// without reorders (Note [oneDNN layouts]); only weights should be reordered.
int64_t reordered_bytes();

/// Attributes every cached primitive is built with (user scratchpad).
const dnnl::primitive_attr& attributes();

/// Executes with this calling thread's OpenMP thread count and a fresh scratchpad; waits.
void execute(const dnnl::primitive& primitive, const dnnl::memory::desc& scratchpad,
             std::unordered_map<int, dnnl::memory> args);

/// Primitives keyed by a string describing shapes and options, and by the calling thread's
/// tandem::num_threads() (Note [oneDNN thread count]); creation is slow, reuse is fast.
template <typename Entry>
class PrimitiveCache {
 public:
  std::shared_ptr<const Entry> get(const std::string& key, const std::function<Entry()>& create) {
    const int threads = num_threads();
    std::lock_guard lock(mutex_);
    auto& slot = entries_[std::to_string(threads) + "threads/" + key];
    if (!slot) {
      use_tandem_thread_count();  // create() reads the OpenMP count of this thread
      slot = std::make_shared<const Entry>(create());
    }
    return slot;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const Entry>> entries_;
};

}  // namespace tandem::cpu::dnnl_context
