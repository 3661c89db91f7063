#include "engine/memory_format.h"

#include <algorithm>
#include <array>

#include "engine/error.h"
#include "engine/memory_format_spellings.h"

namespace tandem {
namespace {

// Dimension order from the innermost (stride 1) outwards.
constexpr std::array<size_t, 4> kChannelsLastOrder = {1, 3, 2, 0};

}  // namespace

const char* memory_format_name(MemoryFormat format) {
  for (const auto& [name, named] : kMemoryFormatSpellings) {
    if (named == format) return name;
  }
  return "unknown";
}

MemoryFormat parse_memory_format(const std::string& text) {
  std::string expected;
  for (const auto& [name, format] : kMemoryFormatSpellings) {
    if (text == name) return format;
    expected += (expected.empty() ? "" : ", ") + std::string(name);
  }
  TANDEM_FAIL("[memory_format] unknown memory format '", text, "': expected one of ", expected);
}

Shape strides_for(const Shape& shape, MemoryFormat format) {
  if (format == MemoryFormat::Contiguous) return contiguous_strides(shape);
  TANDEM_CHECK(shape.size() == 4, "[memory_format] channels_last needs a 4-D tensor, got shape ",
               shape_str(shape));
  Shape strides(4);
  int64_t stride = 1;
  for (size_t d : kChannelsLastOrder) {
    strides[d] = stride;
    stride *= std::max<int64_t>(shape[d], 1);
  }
  return strides;
}

bool is_dense_in(const Shape& shape, const Shape& strides, MemoryFormat format) {
  if (format == MemoryFormat::ChannelsLast && shape.size() != 4) return false;
  const Shape expected = strides_for(shape, format);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1 && strides[d] != expected[d]) return false;
  }
  return true;
}

}  // namespace tandem
