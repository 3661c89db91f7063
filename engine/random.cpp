#include "engine/random.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>

#include "engine/error.h"

namespace tandem {

float Generator::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  // 1 - u keeps the log argument in (0, 1].
  const double u1 = 1.0 - static_cast<double>(engine_() >> 11) * 0x1.0p-53;
  const double u2 = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * std::numbers::pi * u2;
  spare_ = static_cast<float>(radius * std::sin(angle));
  has_spare_ = true;
  return static_cast<float>(radius * std::cos(angle));
}

std::string Generator::state() const {
  std::ostringstream out;
  out.precision(std::numeric_limits<float>::max_digits10);  // exact float round trip
  out << engine_ << ' ' << has_spare_ << ' ' << spare_;
  return out.str();
}

void Generator::set_state(const std::string& state) {
  std::istringstream in(state);
  in >> engine_ >> has_spare_ >> spare_;
  TANDEM_CHECK(!in.fail(), "[generator] cannot parse a generator state");
}

}  // namespace tandem
