#include "apps/common/mode.h"

#include "engine/error.h"

namespace tandem::apps {

Mode parse_mode(const std::string& name) {
  for (const auto& [spelling, mode] : kModeSpellings) {
    if (name == spelling) return mode;
  }
  TANDEM_FAIL("[mode] unknown mode '", name, "': single, dp or ddp");
}

}  // namespace tandem::apps
