#include "engine/cpu/dnnl_context.h"

#include "engine/cpu/parallel.h"
#include "engine/ops/factory.h"

namespace tandem::cpu::dnnl_context {

using dnnl::memory;

dnnl::engine& engine() {
  static dnnl::engine instance(dnnl::engine::kind::cpu, 0);
  return instance;
}

memory::desc plain_desc(const Shape& shape) {
  static const memory::format_tag tags[] = {memory::format_tag::undef, memory::format_tag::a,
                                            memory::format_tag::ab, memory::format_tag::abc,
                                            memory::format_tag::abcd};
  TANDEM_CHECK(shape.size() >= 1 && shape.size() <= 4, "[onednn] unsupported rank ", shape.size());
  return memory::desc(memory::dims(shape.begin(), shape.end()), memory::data_type::f32,
                      tags[shape.size()]);
}

memory wrap(const memory::desc& desc, const Tensor& tensor) {
  return memory(desc, engine(), tensor.data_ptr());
}

memory wrap(const Tensor& tensor) { return wrap(plain_desc(tensor.shape()), tensor); }

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
