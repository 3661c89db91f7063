#pragma once
/// Small wording helpers for what the programs print.

#include <cstdint>
#include <string>

namespace tandem::apps {

/// "1 epoch", "2 epochs": a count with its noun, singular for one.
inline std::string counted(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

/// `word` as a shell reads it back: as it is when it holds only characters a shell leaves alone,
/// else in single quotes ('it'\''s' for a quote inside), so a printed command can be pasted.
inline std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_-+=.,:/@%") == std::string::npos;
  if (plain) return word;
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace tandem::apps
