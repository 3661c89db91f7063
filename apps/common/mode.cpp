#include "apps/common/mode.h"

#include "engine/error.h"

namespace tandem::apps {

Mode parse_mode(const std::string& name) {
  for (int i = 0; i < 3; ++i) {
    if (name == kModeNames[i]) return static_cast<Mode>(i);
  }
  TANDEM_FAIL("[mode] unknown mode '", name, "': single, dp or ddp");
}

}  // namespace tandem::apps
