#pragma once
/// Flags that take one word of a table of Spellings (spellings.h) and parse it into the value it
/// names, at the flag (Note [Typed options]).
///
///   add_choice_flag(app, "--schedule", o.schedule, kScheduleSpellings, "...");
///   // --schedule COSINE sets Schedule::Cosine; --schedule linear fails with
///   // "--schedule: linear not in {multistep,cosine,onecycle}"

#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/common/spellings.h"

namespace tandem::apps {

/// Accepts the table's words in any case and hands the callback the word as the table spells
/// it; --help shows the words as "{a,b,c}". Used with ->transform(): CLI11 2.x runs a ->check()
/// on a copy, which would hand on the word as typed. Not CLI::CheckedTransformer over the enum:
/// that would show the enum's integers in --help and in its error ("value in {single->0,...} OR
/// {0,1,2}") and would take "2" for ddp.
template <typename T>
CLI::IsMember spelling_check(const std::vector<Spelling<T>>& table) {
  std::vector<std::string> words;
  words.reserve(table.size());
  for (const auto& [name, value] : table) words.emplace_back(name);
  return CLI::IsMember(words, CLI::ignore_case);
}

/// `flag WORD` sets `value` to what WORD names in `spellings`; --help gives the default as
/// `value`'s name.
template <typename T, typename Spellings>
CLI::Option* add_choice_flag(CLI::App& app, const std::string& flag, T& value,
                             const Spellings& spellings, const std::string& help) {
  const std::vector<Spelling<T>> table(std::begin(spellings), std::end(spellings));
  return app
      .add_option_function<std::string>(
          flag, [&value, table](const std::string& word) { value = value_in(table, word); }, help)
      ->transform(spelling_check(table))
      ->default_str(name_in(table, value));
}

/// The same for a flag with no default: `value` stays nullopt unless the flag is given.
template <typename T, typename Spellings>
CLI::Option* add_optional_choice_flag(CLI::App& app, const std::string& flag,
                                      std::optional<T>& value, const Spellings& spellings,
                                      const std::string& help) {
  const std::vector<Spelling<T>> table(std::begin(spellings), std::end(spellings));
  return app
      .add_option_function<std::string>(
          flag, [&value, table](const std::string& word) { value = value_in(table, word); }, help)
      ->transform(spelling_check(table));
}

/// `flag A,B,…` sets `values` to what the words name, in their order.
template <typename T, typename Spellings>
CLI::Option* add_choices_flag(CLI::App& app, const std::string& flag, std::vector<T>& values,
                              const Spellings& spellings, const std::string& help) {
  const std::vector<Spelling<T>> table(std::begin(spellings), std::end(spellings));
  std::string defaults;
  for (const T& value : values)
    defaults += (defaults.empty() ? "" : ",") + std::string(name_in(table, value));
  return app
      .add_option_function<std::vector<std::string>>(
          flag,
          [&values, table](const std::vector<std::string>& words) {
            values.clear();
            for (const std::string& word : words) values.push_back(value_in(table, word));
          },
          help)
      ->delimiter(',')
      ->transform(spelling_check(table))
      ->default_str(defaults);
}

}  // namespace tandem::apps
