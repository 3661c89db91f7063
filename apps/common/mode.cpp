#include "apps/common/mode.h"

#include "engine/error.h"

namespace tandem::apps {
namespace {

constexpr const char* kNames[] = {"single", "dp", "ddp"};  // in the enum's order

}  // namespace

const char* mode_name(Mode mode) {
  return kNames[static_cast<int>(mode)];
}

Mode parse_mode(const std::string& name) {
  for (int i = 0; i < 3; ++i) {
    if (name == kNames[i]) return static_cast<Mode>(i);
  }
  TANDEM_FAIL("[mode] unknown mode '", name, "': single, dp or ddp");
}

std::vector<std::string> mode_names() {
  return {std::begin(kNames), std::end(kNames)};
}

}  // namespace tandem::apps
