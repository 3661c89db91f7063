#include "nn/default_init.h"

#include <mutex>

namespace tandem::nn {
namespace {

std::mutex& generator_mutex() {
  static std::mutex mutex;
  return mutex;
}

Generator& shared_generator() {
  static Generator generator(0);
  return generator;
}

thread_local bool skipping = false;

}  // namespace

void manual_seed(uint64_t seed) {
  const std::lock_guard lock(generator_mutex());
  shared_generator().seed(seed);
}

SkipDefaultInit::SkipDefaultInit() : was_skipping_(skipping) {
  skipping = true;
}

SkipDefaultInit::~SkipDefaultInit() {
  skipping = was_skipping_;
}

void draw_default_init(const std::function<void(Generator&)>& draw) {
  if (skipping) return;
  const std::lock_guard lock(generator_mutex());
  draw(shared_generator());
}

}  // namespace tandem::nn
