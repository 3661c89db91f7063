#pragma once
/// How every Tandem program ends on an error: one line on stderr, "<program>: error: <message>",
/// and exit status 1, whatever was thrown and wherever (flag setup included), so nothing escapes
/// main().
///
///   int main(int argc, char** argv) {
///     return tandem::apps::run_main("train_cifar", [&] { return run(argc, argv); });
///   }

#include <cstdio>
#include <exception>
#include <string>

#include "engine/error.h"

namespace tandem::apps {

/// A message tagged with the program's own name ("[train_cifar] …") loses the tag: the line
/// already starts with it. Other tags ("[cifar10]", "[process_group]") say where it comes from.
inline std::string without_own_tag(const char* program, const std::string& message) {
  const std::string tag = std::string("[") + program + "] ";
  return message.rfind(tag, 0) == 0 ? message.substr(tag.size()) : message;
}

template <typename Body>
int run_main(const char* program, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program,
                 without_own_tag(program, message_of(e)).c_str());
  } catch (...) {
    std::fprintf(stderr, "%s: error: an exception that is not a std::exception\n", program);
  }
  return 1;
}

}  // namespace tandem::apps
