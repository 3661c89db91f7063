#include "apps/common/mode.h"

#include "engine/error.h"

namespace tandem::apps {

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::Single: return "single";
    case Mode::DataParallel: return "dp";
    case Mode::Distributed: return "ddp";
  }
  return "?";
}

Mode parse_mode(const std::string& name) {
  for (Mode mode : {Mode::Single, Mode::DataParallel, Mode::Distributed}) {
    if (name == mode_name(mode)) return mode;
  }
  TANDEM_FAIL("[mode] unknown mode '", name, "': single, dp or ddp");
}

std::vector<std::string> mode_names() {
  return {mode_name(Mode::Single), mode_name(Mode::DataParallel), mode_name(Mode::Distributed)};
}

}  // namespace tandem::apps
