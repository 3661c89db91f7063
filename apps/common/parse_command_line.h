#pragma once
/// The one way Tandem's programs parse their flags with CLI11: --help prints the help and asks the
/// caller to exit 0; any parse error becomes a one-line tandem::Error "[program] ... (see --help)".

#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/error.h"

namespace tandem::apps {

/// Returns false after printing help; throws for a bad flag or value.
inline bool parse_command_line(CLI::App& app, int argc, const char* const* argv,
                               const std::string& program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return false;
  } catch (const CLI::ParseError& e) {
    TANDEM_FAIL("[", program, "] ", e.what(), " (see --help)");
  }
  return true;
}

}  // namespace tandem::apps
