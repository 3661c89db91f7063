#pragma once
/// What an app prints for an error: the message of a tandem::Error without the failing
/// expression and file:line that TANDEM_CHECK appends, which help the developer, not the user.

#include <exception>
#include <regex>
#include <string>

namespace tandem::apps {

inline std::string user_message(const std::exception& error) {
  static const std::regex developer_tail(R"(( \(check `.*` failed\))? at \S+:\d+$)");
  return std::regex_replace(std::string(error.what()), developer_tail, "");
}

}  // namespace tandem::apps
