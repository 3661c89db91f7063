#pragma once
/// How a training program spreads its work, named as on the command line (--mode, --modes).

#include <string>

#include "apps/common/spellings.h"

namespace tandem::apps {

enum class Mode {
  Single,        ///< "single": one device
  DataParallel,  ///< "dp": one process, a replica per device (parallel::DataParallel)
  Distributed,   ///< "ddp": a process per device (parallel::DistributedDataParallel)
};

/// Every mode's name, in the enum's order.
inline constexpr Spelling<Mode> kModeSpellings[] = {
    {"single", Mode::Single}, {"dp", Mode::DataParallel}, {"ddp", Mode::Distributed}};

inline const char* mode_name(Mode mode) {
  return name_in(kModeSpellings, mode);
}

/// The inverse of mode_name; throws "[mode] unknown mode 'x': single, dp or ddp".
Mode parse_mode(const std::string& name);

}  // namespace tandem::apps
