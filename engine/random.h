#pragma once
/// A seeded random generator. Random tensors are always drawn on the host and
/// then copied, so the same seed gives the same values on every device.

#include <cstdint>
#include <random>
#include <string>

namespace tandem {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : engine_(seed) {}

  void seed(uint64_t seed) {
    engine_.seed(seed);
    has_spare_ = false;  // a normal drawn before the reseed must not leak into the new sequence
  }
  uint64_t next_u64() { return engine_(); }
  /// Uniform in [0, 1) with 24 random bits (every float32 step is reachable).
  float uniform() { return static_cast<float>(engine_() >> 40) * 0x1.0p-24f; }
  /// Standard normal (Box-Muller; the same on every platform, unlike std::normal_distribution).
  float normal();

  /// Serialised engine state, for checkpoints that resume exactly.
  std::string state() const;
  void set_state(const std::string& state);

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  float spare_ = 0.0f;
};

}  // namespace tandem
