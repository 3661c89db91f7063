#include "parallel/zero/sharding.h"

namespace tandem::parallel {

const char* sharding_name(Sharding sharding) {
  switch (sharding) {
    case Sharding::None: return "none";
    case Sharding::Optimizer: return "optimizer";
    case Sharding::Gradients: return "gradients";
  }
  return "?";
}

}  // namespace tandem::parallel
