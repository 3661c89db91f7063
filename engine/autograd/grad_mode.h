#pragma once
/// Whether ops record autograd history on this thread. Backward workers and
/// optimizer updates run with it off.

namespace tandem::autograd {

bool grad_mode_enabled();
void set_grad_mode_enabled(bool enabled);

/// Turns recording off for this thread while in scope (torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(grad_mode_enabled()) { set_grad_mode_enabled(false); }
  ~NoGradGuard() { set_grad_mode_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace tandem::autograd

namespace tandem {
using autograd::NoGradGuard;
}
