// nn::GradScaler (nn/grad_scaler.h): its rules one at a time, then the whole of it against
// PyTorch's GradScaler on the same gradients (tests/interop/torch_grad_scaler.py), exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include "engine/tandem.h"
#include "nn/grad_scaler.h"
#include "nn/sgd.h"
#include "tests/support/error_message.h"
#include "tests/support/host_reads.h"
#include "tests/support/run_program.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_paths.h"

namespace tandem::nn {
namespace {

using testing::error_message;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// One parameter and an Sgd over it; its gradient set by hand, as a backward of the scaled loss
// would leave it.
struct OneParameter {
  explicit OneParameter(const std::vector<float>& values, const SgdConfig& config = {.lr = 0.5f})
      : param(from_vector(values, {static_cast<int64_t>(values.size())}).set_requires_grad(true)),
        sgd({param}, config) {}
  void set_grad(const std::vector<float>& grad) {
    param.set_grad(from_vector(grad, {static_cast<int64_t>(grad.size())}));
  }
  std::vector<float> values() const { return param.to_vector<float>(); }

  Tensor param;
  Sgd sgd;
};

// A training step's end with `grad` as the scaled gradient: step and update. Whether it stepped.
bool run_step(GradScaler& scaler, OneParameter& p, const std::vector<float>& grad) {
  p.sgd.zero_grad();
  p.set_grad(grad);
  const bool stepped = scaler.step(p.sgd);
  scaler.update();
  return stepped;
}

TEST(GradScaler, DefaultsArePyTorchs) {
  GradScaler scaler;
  EXPECT_TRUE(scaler.is_enabled());
  EXPECT_EQ(scaler.get_scale(), 65536.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  EXPECT_EQ(scaler.state_dict(), (GradScalerState{.scale = 65536.0f,
                                                  .growth_tracker = 0,
                                                  .growth_factor = 2.0,
                                                  .backoff_factor = 0.5,
                                                  .growth_interval = 2000}));
}

TEST(GradScaler, ScalesTheLossAndSoItsGradients) {
  GradScaler scaler;
  Tensor w = from_vector<float>({3.0f}, {1}).set_requires_grad(true);
  const Tensor scaled = scaler.scale(sum(mul(w, 0.25f)));
  EXPECT_EQ(scaled.item(), 0.75 * 65536);
  scaled.backward();
  EXPECT_EQ(w.grad().item(), 0.25 * 65536);
}

TEST(GradScaler, UnscalesSoTheStepSeesTheTrueGradient) {
  GradScaler scaler;
  OneParameter p({1.0f, 2.0f});
  p.set_grad({0.5f * 65536, -65536.0f});
  scaler.unscale(p.sgd);  // where gradients would be clipped
  EXPECT_EQ(p.param.grad().to_vector<float>(), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_TRUE(scaler.step(p.sgd));  // does not unscale again
  EXPECT_EQ(p.values(), (std::vector<float>{0.75f, 2.5f}));
  scaler.update();
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST(GradScaler, AStepWithInfOrNanIsSkippedAndTheScaleBacksOff) {
  for (const float bad : {kInf, -kInf, kNan}) {
    GradScaler scaler({.growth_interval = 3});
    OneParameter p({1.0f, 2.0f}, {.lr = 0.5f, .momentum = 0.9f});
    EXPECT_TRUE(run_step(scaler, p, {65536.0f, 65536.0f}));
    const std::vector<float> weights = p.values();
    const std::vector<float> momentum = p.sgd.momentum_buffers()[0].to_vector<float>();
    EXPECT_FALSE(run_step(scaler, p, {1.0f, bad})) << bad;
    EXPECT_EQ(p.values(), weights) << bad;
    EXPECT_EQ(p.sgd.momentum_buffers()[0].to_vector<float>(), momentum) << bad;
    EXPECT_EQ(scaler.get_scale(), 32768.0f);
    EXPECT_EQ(scaler.growth_tracker(), 0) << "a skipped step resets the tracker";
    EXPECT_EQ(scaler.skipped_steps(), 1);
  }
}

TEST(GradScaler, GrowsAfterGrowthIntervalCleanStepsInARow) {
  GradScaler scaler({.growth_interval = 3});
  OneParameter p({1.0f});
  const std::vector<std::vector<float>> grads = {{1}, {1}, {kInf}, {1}, {1}, {1}, {1}};
  std::vector<std::pair<float, int64_t>> seen;
  for (const auto& grad : grads) {
    run_step(scaler, p, grad);
    seen.emplace_back(scaler.get_scale(), scaler.growth_tracker());
  }
  const std::vector<std::pair<float, int64_t>> expected = {
      {65536, 1}, {65536, 2}, {32768, 0}, {32768, 1}, {32768, 2}, {65536, 0}, {65536, 1}};
  EXPECT_EQ(seen, expected);
}

TEST(GradScaler, NeverGrowsPastTheLargestFloat) {
  const float top = std::ldexp(1.0f, 127);
  GradScaler scaler({.init_scale = top / 2, .growth_interval = 1});
  OneParameter p({1.0f});
  run_step(scaler, p, {1.0f});
  EXPECT_EQ(scaler.get_scale(), top);
  run_step(scaler, p, {1.0f});
  EXPECT_EQ(scaler.get_scale(), top) << "2^128 is inf: the scale stays";
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, ChecksEveryOptimizerOfAStep) {
  GradScaler scaler;
  OneParameter a({1.0f}), b({1.0f});
  a.set_grad({kNan});
  b.set_grad({65536.0f});
  EXPECT_FALSE(scaler.step(a.sgd));
  EXPECT_TRUE(scaler.step(b.sgd)) << "each optimizer skips on its own gradients, as PyTorch's";
  EXPECT_EQ(b.values(), std::vector<float>{0.5f});
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 32768.0f) << "the scale backs off for any of them";
}

// The step reads its flag once (Note [Gradient scaling]); update() reads nothing more.
TEST(GradScaler, OneHostReadPerStep) {
  GradScaler scaler;
  OneParameter p({1.0f, 2.0f});
  p.set_grad({1.0f, 1.0f});
  EXPECT_EQ(testing::host_reads_during([&] { scaler.unscale(p.sgd); }), 0);
  EXPECT_EQ(testing::host_reads_during([&] {
              scaler.step(p.sgd);
              scaler.update();
            }),
            1);
}

TEST(GradScaler, RefusesCallsOutOfOrderAsPyTorchDoes) {
  GradScaler scaler;
  OneParameter p({1.0f});
  p.set_grad({1.0f});
  EXPECT_NE(error_message([&] { scaler.update(); })
                .find("[GradScaler] update() without an inf check: call step() (or unscale()) "
                      "first"),
            std::string::npos);
  scaler.unscale(p.sgd);
  EXPECT_NE(error_message([&] { scaler.unscale(p.sgd); })
                .find("[GradScaler] unscale() has already been called on this optimizer since "
                      "the last update()"),
            std::string::npos);
  scaler.step(p.sgd);
  EXPECT_NE(error_message([&] {
              scaler.step(p.sgd);
            }).find("[GradScaler] step() has already been called since the last update()"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              scaler.unscale(p.sgd);
            }).find("[GradScaler] unscale() is being called after step()"),
            std::string::npos);
  scaler.update();
  p.set_grad({1.0f});
  EXPECT_TRUE(scaler.step(p.sgd)) << "update() starts the next step";
}

TEST(GradScaler, DisabledStepsAsThoughItWereNotThere) {
  GradScaler scaler({.enabled = false});
  const Tensor loss = from_vector<float>({2.0f}, {1});
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  EXPECT_EQ(scaler.get_scale(), 1.0f);
  OneParameter p({1.0f});
  EXPECT_TRUE(run_step(scaler, p, {kInf}));
  EXPECT_EQ(p.values(), std::vector<float>{-kInf}) << "nothing checked";
  EXPECT_FALSE(scaler.state_dict().has_value());
  scaler.load_state_dict({.scale = 8.0f});
  EXPECT_EQ(scaler.get_scale(), 1.0f);
}

TEST(GradScaler, RefusesSettingsItCannotRunWith) {
  const std::vector<std::pair<GradScalerOptions, std::string>> cases = {
      {{.growth_factor = 1.0}, "growth_factor must be > 1, got 1"},
      {{.backoff_factor = 1.0}, "backoff_factor must be in (0, 1), got 1"},
      {{.backoff_factor = 0.0}, "backoff_factor must be in (0, 1), got 0"},
      {{.growth_interval = 0}, "growth_interval must be >= 1, got 0"},
      {{.init_scale = 0.0f}, "the scale must be finite and > 0, got 0"},
      {{.init_scale = kInf}, "the scale must be finite and > 0, got inf"},
  };
  for (const auto& [options, message] : cases) {
    EXPECT_NE(error_message([&] { GradScaler scaler(options); }).find("[GradScaler] " + message),
              std::string::npos)
        << message;
    GradScalerOptions disabled = options;
    disabled.enabled = false;
    EXPECT_NO_THROW(GradScaler scaler(disabled)) << "PyTorch checks only an enabled scaler";
  }
}

TEST(GradScaler, LoadsAStateDictSettingsIncludedAfterCheckingIt) {
  GradScaler source({.init_scale = 3.0f, .growth_factor = 1.37, .growth_interval = 5});
  OneParameter p({1.0f});
  for (int i = 0; i < 7; ++i) run_step(source, p, {1.0f});
  const GradScalerState state = *source.state_dict();
  EXPECT_EQ(state.scale, static_cast<float>(3.0f * 1.37));
  EXPECT_EQ(state.growth_tracker, 2);

  GradScaler loaded;
  loaded.load_state_dict(state);
  EXPECT_EQ(loaded.state_dict(), state);
  GradScalerState bad = state;
  bad.growth_tracker = -1;
  EXPECT_NE(error_message([&] {
              loaded.load_state_dict(bad);
            }).find("[GradScaler] the growth tracker must be >= 0, got -1"),
            std::string::npos);
  EXPECT_EQ(loaded.state_dict(), state) << "refused before anything changed";
}

// ---- Against PyTorch -------------------------------------------------------------------------

struct TorchStep {
  bool unscale_first = false;  ///< unscale() before step(), as before clipping
  std::vector<float> grad;     ///< the scaled gradient backward left
};

struct TorchCase {
  std::string name;
  GradScalerOptions options;
  SgdConfig sgd;
  std::vector<float> initial;
  std::vector<TorchStep> steps;
};

// After each step and update: whether it was skipped, the scale, the tracker, the weights.
struct Outcome {
  bool found_inf = false;
  float scale = 0;
  int64_t growth_tracker = 0;
  std::vector<float> weights;
};

// C's %a, which Python's float.fromhex reads, bit for bit; inf and nan spelled as it spells them.
std::string hex(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[64];
  std::snprintf(text, sizeof text, "%a", value);
  return text;
}

void write_case(const TorchCase& c, const std::string& path) {
  std::ofstream out(path);
  out << hex(c.options.init_scale) << ' ' << hex(c.options.growth_factor) << ' '
      << hex(c.options.backoff_factor) << ' ' << c.options.growth_interval << ' ' << hex(c.sgd.lr)
      << ' ' << hex(c.sgd.momentum) << '\n';
  for (const float v : c.initial) out << hex(v) << ' ';
  out << '\n';
  for (const TorchStep& step : c.steps) {
    out << (step.unscale_first ? 1 : 0);
    for (const float g : step.grad) out << ' ' << hex(g);
    out << '\n';
  }
}

// The lines torch_grad_scaler.py printed; nullopt with `why` when PyTorch is not there.
std::optional<std::vector<Outcome>> torch_outcomes(const TorchCase& c, std::string& why) {
  testing::TempDir dir;
  write_case(c, dir.file("case.txt"));
  const char* python = std::getenv("TANDEM_TORCH_PYTHON");
  const testing::ProgramRun run =
      testing::run_program(python != nullptr && *python != '\0' ? python : "/usr/bin/python3",
                           {testing::kTorchGradScalerScript, dir.file("case.txt")}, /*merge=*/false,
                           dir.file("stderr.txt"));
  if (run.exit_code == 127 || run.output.rfind("skip:", 0) == 0) {
    why = run.output + run.errors;
    return std::nullopt;
  }
  EXPECT_EQ(run.exit_code, 0) << run.errors;
  std::vector<Outcome> outcomes;
  std::istringstream lines(run.output);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string found, scale, value;
    Outcome outcome;
    fields >> found >> scale >> outcome.growth_tracker;
    outcome.found_inf = found == "1";
    outcome.scale = static_cast<float>(std::strtod(scale.c_str(), nullptr));
    while (fields >> value) outcome.weights.push_back(std::strtof(value.c_str(), nullptr));
    outcomes.push_back(outcome);
  }
  return outcomes;
}

std::vector<Outcome> tandem_outcomes(const TorchCase& c) {
  GradScaler scaler(c.options);
  OneParameter p(c.initial, c.sgd);
  std::vector<Outcome> outcomes;
  for (const TorchStep& step : c.steps) {
    p.sgd.zero_grad();
    p.set_grad(step.grad);
    if (step.unscale_first) scaler.unscale(p.sgd);
    const bool stepped = scaler.step(p.sgd);
    scaler.update();
    outcomes.push_back({!stepped, scaler.get_scale(), scaler.growth_tracker(), p.values()});
  }
  return outcomes;
}

// Gradients as backward would leave them at scale `scale`: normal values times it, with
// `poison` written into element 1 at the given steps.
std::vector<TorchStep> gradients(int steps, float scale, const std::map<int, float>& poison) {
  std::mt19937 engine(5);
  std::normal_distribution<float> normal;
  std::vector<TorchStep> out;
  for (int i = 0; i < steps; ++i) {
    TorchStep step{.unscale_first = i % 7 == 3, .grad = {}};
    for (int j = 0; j < 4; ++j) step.grad.push_back(normal(engine) * scale);
    if (const auto at = poison.find(i); at != poison.end()) step.grad[1] = at->second;
    out.push_back(step);
  }
  return out;
}

// Learning rates and momenta are powers of two: every product in SGD's update is then exact, so
// PyTorch's fused multiply-adds round as Tandem's separate multiply and add do, and the weights
// compare bit for bit (and through them the unscaled gradients and which steps were taken).
std::vector<TorchCase> torch_cases() {
  const float top = std::ldexp(1.0f, 125);
  const float big = std::numeric_limits<float>::max() / 2;  // finite: no skip
  return {
      // PyTorch's defaults long enough to grow twice: skips at 3 and 4 (two in a row), growth
      // 2,000 clean steps later (at 2004), a skip at 2500 resetting a tracker of 495, growth at
      // 4500.
      {"defaults",
       {},
       {.lr = 0.0078125f, .momentum = 0.5f},
       {1.0f, -0.5f, 0.25f, 2.0f},
       gradients(4600, 16384.0f, {{3, kInf}, {4, kNan}, {2500, -kInf}})},
      // Factors that do not round to powers of two: the double products rounded to float.
      {"rounding",
       {.init_scale = 3.0f, .growth_factor = 1.37, .backoff_factor = 0.6, .growth_interval = 3},
       {.lr = 0.5f},
       {1.0f, -0.5f, 0.25f, 2.0f},
       gradients(60, 2.0f, {{10, kNan}, {11, big}, {20, kInf}, {40, -kInf}})},
      // Growth every step up to 2^127 and not to inf; an inverse scale that is subnormal.
      {"largest scale",
       {.init_scale = top, .growth_interval = 1},
       {.lr = 0.5f},
       {1.0f, -0.5f, 0.25f, 2.0f},
       gradients(8, 1e30f, {{6, kNan}})},
      // A scale of 1: gradients left as they are.
      {"scale one",
       {.init_scale = 1.0f, .growth_interval = 4},
       {.lr = 0.5f, .momentum = 0.5f},
       {1.0f, -0.5f, 0.25f, 2.0f},
       gradients(10, 1.0f, {{2, kInf}})},
  };
}

// Note: PyTorch's GradScaler runs as it is, only its two kernels stand in for the missing CPU ones
// (torch_grad_scaler.py says how); the weights also check the unscaled gradients through SGD.
TEST(GradScalerTorch, TheSameScalesSkipsAndWeightsAsPyTorch) {
  for (const TorchCase& c : torch_cases()) {
    std::string why;
    const auto expected = torch_outcomes(c, why);
    if (!expected) GTEST_SKIP() << "no PyTorch: " << why;
    const std::vector<Outcome> actual = tandem_outcomes(c);
    ASSERT_EQ(actual.size(), expected->size()) << c.name;
    int skipped = 0;
    for (size_t i = 0; i < actual.size(); ++i) {
      const Outcome &a = actual[i], &e = (*expected)[i];
      ASSERT_EQ(a.found_inf, e.found_inf) << c.name << " step " << i;
      ASSERT_EQ(a.scale, e.scale) << c.name << " step " << i;
      ASSERT_EQ(a.growth_tracker, e.growth_tracker) << c.name << " step " << i;
      ASSERT_EQ(a.weights, e.weights) << c.name << " step " << i;
      skipped += a.found_inf ? 1 : 0;
    }
    EXPECT_GT(skipped, 0) << c.name;
  }
}

}  // namespace
}  // namespace tandem::nn
