#pragma once
/// An environment variable set (or unset) for one scope, and put back as it was at its end, for
/// tests of behaviour that a variable switches (TANDEM_DEBUG: Note [Error locations]).

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace tandem::testing {

class ScopedEnvironmentVariable {
 public:
  /// `value` nullptr: unset for the scope.
  ScopedEnvironmentVariable(std::string name, const char* value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    value != nullptr ? ::setenv(name_.c_str(), value, 1) : ::unsetenv(name_.c_str());
  }
  ~ScopedEnvironmentVariable() {
    old_ ? ::setenv(name_.c_str(), old_->c_str(), 1) : ::unsetenv(name_.c_str());
  }
  ScopedEnvironmentVariable(const ScopedEnvironmentVariable&) = delete;
  ScopedEnvironmentVariable& operator=(const ScopedEnvironmentVariable&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace tandem::testing
