#include "engine/device.h"

#include <charconv>
#include <ostream>

#include "engine/error.h"

namespace tandem {

Device Device::parse(std::string_view text) {
  const auto colon = text.find(':');
  const std::string_view kind = text.substr(0, colon);
  Device device;
  if (kind == "cpu") {
    device.type = DeviceType::CPU;
  } else if (kind == "cuda") {
    device.type = DeviceType::CUDA;
  } else {
    TANDEM_FAIL("[device] cannot parse '", text, "': expected cpu[:N] or cuda[:N]");
  }
  if (colon != std::string_view::npos) {
    const std::string_view digits = text.substr(colon + 1);
    const auto [end, error] =
        std::from_chars(digits.data(), digits.data() + digits.size(), device.index);
    TANDEM_CHECK(error == std::errc() && end == digits.data() + digits.size() && !digits.empty() &&
                     device.index >= 0,
                 "[device] cannot parse '", text, "': the index must be a non-negative integer");
  }
  return device;
}

std::string Device::str() const {
  return std::string(is_cpu() ? "cpu:" : "cuda:") + std::to_string(index);
}

std::ostream& operator<<(std::ostream& out, const Device& device) {
  return out << device.str();
}

}  // namespace tandem
