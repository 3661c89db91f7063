#include "engine/error.h"

namespace tandem {

std::string message_of(const std::exception& error) {
  if (const auto* tandem_error = dynamic_cast<const Error*>(&error)) return tandem_error->message();
  return error.what();
}

namespace detail {

void throw_error(const char* file, int line, const char* expression, const std::string& message) {
  std::ostringstream location;
  if (expression != nullptr) location << " (check `" << expression << "` failed)";
  location << " at " << file << ":" << line;
  throw Error(message, location.str());
}

}  // namespace detail
}  // namespace tandem
