#include "engine/error.h"

namespace tandem::detail {

void throw_error(const char* file, int line, const char* expression, const std::string& message) {
  std::ostringstream out;
  out << message;
  if (expression != nullptr) out << " (check `" << expression << "` failed)";
  out << " at " << file << ":" << line;
  throw Error(out.str());
}

}  // namespace tandem::detail
