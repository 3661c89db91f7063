#include "apps/bench_collectives/byte_sizes.h"

#include <array>
#include <cctype>
#include <utility>

#include "engine/error.h"

namespace tandem::apps {

namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kLargest = kKiB * kKiB * kKiB * kKiB;  // 1 TiB: beyond any host buffer here

constexpr std::array<std::pair<const char*, int64_t>, 10> kUnits = {{
    {"", 1},
    {"B", 1},
    {"K", kKiB},
    {"KiB", kKiB},
    {"M", kKiB* kKiB},
    {"MiB", kKiB* kKiB},
    {"G", kKiB* kKiB* kKiB},
    {"GiB", kKiB* kKiB* kKiB},
    {"k", kKiB},
    {"m", kKiB* kKiB},
}};

}  // namespace

int64_t parse_byte_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  TANDEM_CHECK(digits > 0 && digits <= 13, "[bench_collectives] size '", text,
               "' is not a number of bytes (e.g. 4096, 4K, 64KiB, 16M, 1G)");
  const int64_t number = std::stoll(text.substr(0, digits));
  const std::string unit = text.substr(digits);
  for (const auto& [name, scale] : kUnits) {
    if (unit != name) continue;
    TANDEM_CHECK(number > 0 && number <= kLargest / scale, "[bench_collectives] size '", text,
                 "' must be between 1 byte and 1 TiB");
    return number * scale;
  }
  TANDEM_FAIL("[bench_collectives] size '", text, "' has an unknown unit '", unit,
              "' (K/KiB, M/MiB, G/GiB: powers of 1024)");
}

std::string byte_size_label(int64_t bytes) {
  const std::array<std::pair<const char*, int64_t>, 3> units = {{
      {"GiB", kKiB * kKiB * kKiB},
      {"MiB", kKiB * kKiB},
      {"KiB", kKiB},
  }};
  for (const auto& [name, scale] : units) {
    if (bytes >= scale && bytes % scale == 0) return std::to_string(bytes / scale) + " " + name;
  }
  return std::to_string(bytes) + " B";
}

}  // namespace tandem::apps
