#pragma once
/// Errors: every failed check in Tandem throws tandem::Error with a message that starts with the op
/// name, e.g. "[conv2d] weight has 3 dims, expected 4"; under TANDEM_DEBUG=1 (Note [Error
/// locations] in error.cpp) its what() also names the failing expression and file:line.

#include <sstream>
#include <stdexcept>
#include <string>

namespace tandem {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : Error(message, "") {}
  /// `location` (" (check `x` failed) at file:line") follows the message in what().
  Error(const std::string& message, const std::string& location)
      : std::runtime_error(message + location), message_(message) {}

  /// The message without the location: what a program shows its user.
  const std::string& message() const { return message_; }

 private:
  std::string message_;
};

/// What to show a user for `error`: what() (a tandem::Error's message; under TANDEM_DEBUG, with its
/// file:line). Also what to quote when wrapping a lower layer's error in a message of one's own.
std::string message_of(const std::exception& error);

namespace detail {

template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

[[noreturn]] void throw_error(const char* file, int line, const char* expression,
                              const std::string& message);

}  // namespace detail
}  // namespace tandem

/// TANDEM_CHECK(cond, "[op] message ", value, ...) throws tandem::Error when
/// cond is false. The message parts are only formatted on failure.
/// Variadic, as PyTorch's TORCH_CHECK: a streaming `<< msg` form would need a
/// destructor that throws.
#define TANDEM_CHECK(cond, ...)                                             \
  do {                                                                      \
    if (!(cond)) [[unlikely]] {                                             \
      ::tandem::detail::throw_error(__FILE__, __LINE__, #cond,              \
                                    ::tandem::detail::concat(__VA_ARGS__)); \
    }                                                                       \
  } while (false)

/// Unconditional failure, for unreachable branches and unsupported cases.
#define TANDEM_FAIL(...) \
  ::tandem::detail::throw_error(__FILE__, __LINE__, nullptr, ::tandem::detail::concat(__VA_ARGS__))
