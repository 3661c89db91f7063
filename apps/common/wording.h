#pragma once
/// Small wording helpers for what the programs print.

#include <cstdint>
#include <string>

namespace tandem::apps {

/// "1 epoch", "2 epochs": a count with its noun, singular for one.
inline std::string counted(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

}  // namespace tandem::apps
