#include "engine/error.h"

#include <cstdlib>
#include <cstring>

namespace tandem {
namespace {

// Note [Error locations]: the failing expression and file:line are for whoever debugs Tandem, not
// for whoever uses it: "[item] tensor has 2 elements (check `numel() == 1` failed) at
// ../engine/tensor.cpp:212" asks a user to read the source. So a failed check's what() is its
// message alone, as a program that prints e.what() shows it, and TANDEM_DEBUG=1 (any value but ""
// and "0") adds the location, in every program's error line and every test's failure. Read at
// each error, so a test or a debugging session may set it at any time.
bool locations_shown() {
  const char* debug = std::getenv("TANDEM_DEBUG");
  return debug != nullptr && debug[0] != '\0' && std::strcmp(debug, "0") != 0;
}

}  // namespace

std::string message_of(const std::exception& error) {
  return error.what();
}

namespace detail {

void throw_error(const char* file, int line, const char* expression, const std::string& message) {
  if (!locations_shown()) throw Error(message);
  std::ostringstream location;
  if (expression != nullptr) location << " (check `" << expression << "` failed)";
  location << " at " << file << ":" << line;
  throw Error(message, location.str());
}

}  // namespace detail
}  // namespace tandem
