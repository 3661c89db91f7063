#pragma once
/// How a training program spreads its work, named as on the command line (--mode, --modes).

#include <string>
#include <vector>

namespace tandem::apps {

enum class Mode {
  Single,        ///< "single": one device
  DataParallel,  ///< "dp": one process, a replica per device (parallel::DataParallel)
  Distributed,   ///< "ddp": a process per device (parallel::DistributedDataParallel)
};

/// "single", "dp" or "ddp".
const char* mode_name(Mode mode);

/// The inverse of mode_name; throws "[mode] unknown mode 'x': single, dp or ddp".
Mode parse_mode(const std::string& name);

/// Every mode's name, in the enum's order (for flag checks and help texts).
std::vector<std::string> mode_names();

}  // namespace tandem::apps
