#include "engine/cpu/dnnl_context.h"

#include <atomic>

#include "engine/cpu/parallel.h"
#include "engine/ops/factory.h"
#include "engine/profiler.h"

namespace tandem::cpu::dnnl_context {

using dnnl::memory;

dnnl::engine& engine() {
  static dnnl::engine instance(dnnl::engine::kind::cpu, 0);
  return instance;
}

memory::data_type data_type_of(DType dtype) {
  switch (dtype) {
    case DType::Float32: return memory::data_type::f32;
    case DType::BFloat16: return memory::data_type::bf16;
    case DType::Float16: return memory::data_type::f16;
    default: TANDEM_FAIL("[onednn] no oneDNN float type for ", dtype_name(dtype));
  }
}

memory::desc plain_desc(const Shape& shape, DType dtype) {
  static const memory::format_tag tags[] = {memory::format_tag::undef, memory::format_tag::a,
                                            memory::format_tag::ab, memory::format_tag::abc,
                                            memory::format_tag::abcd};
  TANDEM_CHECK(shape.size() >= 1 && shape.size() <= 4, "[onednn] unsupported rank ", shape.size());
  return memory::desc(memory::dims(shape.begin(), shape.end()), data_type_of(dtype),
                      tags[shape.size()]);
}

memory::desc format_desc(const Shape& shape, MemoryFormat format, DType dtype) {
  if (format == MemoryFormat::Contiguous) return plain_desc(shape, dtype);
  TANDEM_CHECK(shape.size() == 4, "[onednn] channels_last needs 4 dims, got ", shape_str(shape));
  return memory::desc(memory::dims(shape.begin(), shape.end()), data_type_of(dtype),
                      memory::format_tag::nhwc);
}

memory::desc desc_of(const Tensor& tensor) {
  if (tensor.is_contiguous()) return plain_desc(tensor.shape(), tensor.dtype());
  if (tensor.is_contiguous(MemoryFormat::ChannelsLast)) {
    return format_desc(tensor.shape(), MemoryFormat::ChannelsLast, tensor.dtype());
  }
  return memory::desc(memory::dims(tensor.shape().begin(), tensor.shape().end()),
                      data_type_of(tensor.dtype()),
                      memory::dims(tensor.strides().begin(), tensor.strides().end()));
}

memory::desc any_desc(const Shape& shape, DType dtype) {
  return memory::desc(memory::dims(shape.begin(), shape.end()), data_type_of(dtype),
                      memory::format_tag::any);
}

memory wrap(const memory::desc& desc, const Tensor& tensor) {
  return memory(desc, engine(), tensor.data_ptr());
}

memory wrap(const Tensor& tensor) {
  return wrap(desc_of(tensor), tensor);
}

namespace {

memory buffer_for(const memory::desc& layout, Tensor& holder) {
  holder = empty({static_cast<int64_t>(layout.get_size())}, {.dtype = DType::UInt8});
  return memory(layout, engine(), holder.data_ptr());
}

std::atomic<int64_t>& reordered_bytes_counter() {
  static std::atomic<int64_t> bytes{0};
  return bytes;
}

void reorder(const memory& from, const memory& to) {
  const profiler::RecordScope scope("onednn_reorder");
  reordered_bytes_counter() += static_cast<int64_t>(to.get_desc().get_size());
  use_tandem_thread_count();
  dnnl::stream stream(engine());
  dnnl::reorder(from, to).execute(stream, const_cast<memory&>(from), const_cast<memory&>(to));
  stream.wait();
}

}  // namespace

memory as_layout(const Tensor& tensor, const memory::desc& desired, Tensor& holder) {
  memory plain = wrap(tensor);
  if (plain.get_desc() == desired) return plain;
  memory converted = buffer_for(desired, holder);
  reorder(plain, converted);
  return converted;
}

memory output_in_layout(const Tensor& tensor, const memory::desc& layout, Tensor& holder) {
  if (desc_of(tensor) == layout) return wrap(tensor);
  return buffer_for(layout, holder);
}

void copy_to_tensor(const memory& result, const Tensor& tensor) {
  if (result.get_data_handle() == tensor.data_ptr()) return;
  reorder(result, wrap(tensor));
}

int64_t reordered_bytes() {
  return reordered_bytes_counter().load();
}

const dnnl::primitive_attr& attributes() {
  static const dnnl::primitive_attr attr = [] {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }();
  return attr;
}

void execute(const dnnl::primitive& primitive, const memory::desc& scratchpad,
             std::unordered_map<int, memory> args) {
  use_tandem_thread_count();
  const size_t bytes = scratchpad.get_size();
  Tensor buffer;
  if (bytes > 0) {
    buffer = empty({static_cast<int64_t>(bytes)}, {.dtype = DType::UInt8});
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratchpad, engine(), buffer.data_ptr()));
  }
  try {
    dnnl::stream stream(engine());
    primitive.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    TANDEM_FAIL("[onednn] ", e.what(), " (status ", static_cast<int>(e.status), ")");
  }
}

}  // namespace tandem::cpu::dnnl_context
