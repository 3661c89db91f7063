#include "apps/common/flag_errors.h"

#include <CLI/CLI.hpp>
#include <algorithm>

namespace tandem::apps {
namespace {

// Edits (insert, delete, replace) from `a` to `b`.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

}  // namespace

std::string closest_flag(const CLI::App& app, const std::string& unknown) {
  const std::string wanted = dashed(unknown.substr(0, unknown.find('=')));
  std::string best;
  size_t best_distance = 3;  // at most 2 edits
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) {
      const std::string flag = "--" + name;
      // A prefix of a real flag (tandem-run --nproc for --nproc-per-node) counts as 1 edit.
      const size_t distance =
          flag.rfind(wanted, 0) == 0 && wanted.size() > 3 ? 1 : edit_distance(wanted, flag);
      if (distance < best_distance && 2 * distance < name.size()) {
        best = flag;
        best_distance = distance;
      }
    }
  }
  return best;
}

std::string unexpected_arguments_message(const CLI::App& app,
                                         const std::vector<std::string>& arguments) {
  std::string message;
  for (const std::string& argument : arguments) {
    if (argument.rfind("--", 0) != 0) continue;
    const std::string suggestion = closest_flag(app, argument);
    if (!message.empty()) message += "; ";
    message += argument + ": unknown flag" +
               (suggestion.empty() ? "" : "; did you mean " + suggestion + "?");
  }
  if (!message.empty()) return message;
  std::string listed;
  for (const std::string& argument : arguments) listed += (listed.empty() ? "" : " ") + argument;
  return "unexpected argument" + std::string(arguments.size() == 1 ? "" : "s") + ": " + listed;
}

namespace {

// A check that the flag's text is a number for which `holds` is true: "must be > 0, got -0.1";
// "must be a number > 0, got 'abc'".
CLI::Validator number_check(const std::string& wanted, bool (*holds)(double)) {
  return CLI::Validator(
      [wanted, holds](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) {
          return "must be a number " + wanted + ", got '" + text + "'";
        }
        return holds(value) ? "" : "must be " + wanted + ", got " + text;
      },
      wanted);
}

}  // namespace

CLI::Validator positive_number() {
  return number_check("> 0", [](double value) { return value > 0; });
}

CLI::Validator non_negative_number() {
  return number_check(">= 0", [](double value) { return value >= 0; });
}

CLI::Validator positive_count() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int value = 0;
        if (!CLI::detail::lexical_cast(text, value)) {
          return "must be a whole number > 0, got '" + text + "'";
        }
        return value > 0 ? "" : "must be > 0, got " + text;
      },
      "> 0");
}

}  // namespace tandem::apps
