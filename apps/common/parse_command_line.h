#pragma once
/// The one way Tandem's programs parse their flags with CLI11: --help prints the help and --version
/// "<program> <version>", and both ask the caller to exit 0; an unknown flag names the closest
/// real one (flag_errors.h); any other parse error becomes a one-line
/// tandem::Error "[program] ... (see --help)".

#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "apps/common/flag_errors.h"
#include "apps/common/version.h"
#include "engine/error.h"

namespace tandem::apps {

/// Returns false after printing help or the version; throws for a bad flag or value.
inline bool parse_command_line(CLI::App& app, int argc, const char* const* argv,
                               const std::string& program) {
  app.set_version_flag("--version", std::string(tandem_version()), "print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return false;
  } catch (const CLI::CallForVersion&) {
    std::cout << program << " " << tandem_version() << "\n";
    return false;
  } catch (const CLI::ExtrasError&) {
    TANDEM_FAIL("[", program, "] ", unexpected_arguments_message(app, app.remaining()),
                " (see --help)");
  } catch (const CLI::ParseError& e) {
    TANDEM_FAIL("[", program, "] ", e.what(), " (see --help)");
  }
  return true;
}

}  // namespace tandem::apps
