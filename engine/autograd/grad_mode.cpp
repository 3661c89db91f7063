#include "engine/autograd/grad_mode.h"

namespace tandem::autograd {
namespace {
thread_local bool grad_enabled = true;
}

bool grad_mode_enabled() {
  return grad_enabled;
}
void set_grad_mode_enabled(bool enabled) {
  grad_enabled = enabled;
}

}  // namespace tandem::autograd
