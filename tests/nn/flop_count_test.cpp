// Note [Counting FLOPs] (nn/flop_count.h) against counts made here by hand, from the layers'
// shapes alone; and the profiler on a real training step: its table's shares add up, and a
// profiled step computes exactly what an unprofiled one does. (PyTorch counts the ResNets the same
// way in tests/interop: PyTorchCountsTheSameFlops.)
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <sstream>

#include "engine/profiler.h"
#include "engine/profiler_table.h"
#include "engine/tandem.h"
#include "nn/flop_count.h"
#include "nn/resnet.h"
#include "nn/sgd.h"
#include "tests/support/error_message.h"

namespace tandem::nn {
namespace {

using testing::contains;
using testing::error_message;

// A k×k convolution from `in` to `out` channels onto a side×side map: 2 FLOPs a multiply-add.
double conv_flops(int64_t in, int64_t out, int64_t k, int64_t side) {
  return 2.0 * static_cast<double>(in * out * k * k * side * side);
}

// The forward FLOPs of resnet_config(arch) on a 32×32 image, layer by layer as nn/resnet.h
// describes the architecture; `first_conv` gets the stem's share (its input needs no gradient).
double resnet_forward_flops(const std::string& arch, double& first_conv) {
  const ResNetConfig config = resnet_config(arch);
  int64_t side = 32, channels = config.widths[0];
  first_conv = conv_flops(3, channels, 3, side);
  double flops = first_conv;
  for (size_t stage = 0; stage < config.blocks.size(); ++stage) {
    const int64_t width = config.widths[stage];
    for (int64_t block = 0; block < config.blocks[stage]; ++block) {
      const int64_t stride = stage > 0 && block == 0 ? 2 : 1;
      side /= stride;
      flops += conv_flops(channels, width, 3, side) + conv_flops(width, width, 3, side);
      if (stride != 1 || channels != width) flops += conv_flops(channels, width, 1, side);
      channels = width;
    }
  }
  return flops + 2.0 * static_cast<double>(channels * config.num_classes);  // fc
}

class FlopCount : public ::testing::TestWithParam<std::string> {};

TEST_P(FlopCount, ResNetAsCountedByHand) {
  Generator generator(0);
  const auto model = make_resnet(GetParam(), generator);
  double first_conv = 0;
  const double forward = resnet_forward_flops(GetParam(), first_conv);
  const StepFlops flops = count_training_flops(*model, {3, 32, 32});
  EXPECT_DOUBLE_EQ(flops.forward, forward);
  // Every layer's input and weight gradients, as many FLOPs as its forward, but the stem's input.
  EXPECT_DOUBLE_EQ(flops.backward, 2 * forward - first_conv);
  EXPECT_DOUBLE_EQ(flops.total(), flops.forward + flops.backward);
}

INSTANTIATE_TEST_SUITE_P(Archs, FlopCount, ::testing::Values("resnet20", "resnet18"));

TEST(FlopCount, ResNet20IsTheFigureTheDocsGive) {
  Generator generator(0);
  const auto model = make_resnet("resnet20", generator);
  const StepFlops flops = count_training_flops(*model, {3, 32, 32});
  EXPECT_NEAR(flops.forward / 1e6, 81.6, 0.05);
  EXPECT_NEAR(flops.total() / 1e6, 244.0, 0.05);
}

TEST(FlopCount, FollowsTheInputShapeAndLeavesTheModelAlone) {
  Generator generator(0);
  const auto model = make_resnet("resnet20", generator);
  model->set_precision(Precision::BFloat16);
  const std::vector<float> before = model->parameters()[0].to_vector<float>();
  // 64×64 images: four times the pixels, four times the convolutions; the fc is the same.
  const double fc = 2.0 * 64 * 10;
  const double small = count_training_flops(*model, {3, 32, 32}).forward;
  const double large = count_training_flops(*model, {3, 64, 64}).forward;
  EXPECT_DOUBLE_EQ(large - fc, 4 * (small - fc));
  EXPECT_EQ(model->parameters()[0].to_vector<float>(), before);
  EXPECT_FALSE(model->parameters()[0].grad().defined());
  EXPECT_TRUE(model->is_training());
  EXPECT_EQ(model->precision(), Precision::BFloat16);
}

TEST(FlopCount, RefusesBadShapesAndARunningProfile) {
  Generator generator(0);
  const auto model = make_resnet("resnet20", generator);
  const auto count = [&](const Shape& images) { count_training_flops(*model, images); };
  EXPECT_TRUE(contains(error_message([&] {
                         count({32, 32});
                       }),
                       "[flop_count] images are (C, H, W), got [32, 32]"));
  profiler::Recording recording;
  EXPECT_TRUE(contains(error_message([&] {
                         count({3, 32, 32});
                       }),
                       "[flop_count] cannot count while a profile is being recorded"));
}

// Trains `steps` SGD steps of a ResNet-20 on a fixed batch; with `profiled`, each step is a
// ProfilerStep of a recording. Returns the parameters' values, and the profile in `profile`.
std::vector<std::vector<float>> train(int steps, bool profiled, profiler::Profile& profile) {
  Generator generator(0);
  const auto model = make_resnet("resnet20", generator);
  model->to(MemoryFormat::ChannelsLast);
  Sgd sgd(model->parameters(), {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 5e-4f});
  const Tensor images = randn({8, 3, 32, 32}, generator).contiguous(MemoryFormat::ChannelsLast);
  const Tensor labels =
      from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}, {8}, {.dtype = DType::Int64});
  std::optional<profiler::Recording> recording;
  if (profiled) recording.emplace();
  for (int step = 0; step < steps; ++step) {
    const profiler::RecordScope scope([step] { return "ProfilerStep#" + std::to_string(step); },
                                      profiler::Category::Step);
    sgd.zero_grad();
    cross_entropy(model->forward(images), labels).backward();
    sgd.step();
  }
  if (recording) profile = recording->stop();
  std::vector<std::vector<float>> values;
  for (const Tensor& p : model->parameters()) values.push_back(p.contiguous().to_vector<float>());
  return values;
}

TEST(Profiling, LeavesTheStepsNumericsBitIdentical) {
  profiler::Profile unused, profile;
  EXPECT_EQ(train(2, true, profile), train(2, false, unused));
  EXPECT_FALSE(profile.tracks.empty());
}

// The time the ops of `track` cover inside its steps: the union of their intervals.
double covered_ms(const profiler::Track& track) {
  std::vector<std::pair<int64_t, int64_t>> steps, ops;
  for (const profiler::Event& e : track.events) {
    (e.category == profiler::Category::Step ? steps : ops).emplace_back(e.begin_ns, e.end_ns);
  }
  std::sort(ops.begin(), ops.end());
  int64_t covered = 0, reach = INT64_MIN;
  for (const auto& [begin, end] : ops) {
    const bool in_step = std::any_of(steps.begin(), steps.end(), [&](const auto& s) {
      return begin >= s.first && end <= s.second;
    });
    if (!in_step) continue;
    covered += std::max<int64_t>(0, end - std::max(begin, reach));
    reach = std::max(reach, end);
  }
  return static_cast<double>(covered) / 1e6;
}

// The "% of step" cells (the last of each row) of the first table of format_table()'s text, summed.
double printed_shares(const std::string& text) {
  double sum = 0;
  std::istringstream in(text);
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| ", 0) != 0) {
      if (in_table) break;
      continue;
    }
    if (!in_table) {  // the header
      in_table = true;
      continue;
    }
    const size_t last = line.rfind('|', line.size() - 2);  // the last cell's opening bar
    const std::string cell = line.substr(last + 1);
    if (cell.find('%') != std::string::npos) sum += std::stod(cell);  // not the rule
  }
  return sum;
}

TEST(Profiling, TheTablesSharesOfARealStepAddUpToAllOfIt) {
  profiler::Profile profile;
  train(2, true, profile);
  const profiler::ProfileSummary s = profiler::summarize(profile);
  EXPECT_EQ(s.steps, 2);
  ASSERT_EQ(s.step_thread.thread, "main");
  // Self times count every moment of the step in exactly one op (Note [Self time]).
  const auto track = std::find_if(profile.tracks.begin(), profile.tracks.end(),
                                  [](const profiler::Track& t) { return t.name == "main"; });
  EXPECT_NEAR(s.step_thread.busy_ms, covered_ms(*track), 1e-6);
  EXPECT_GT(s.outside_ops_ms, 0.0);
  const std::string table = profiler::format_table(s);
  EXPECT_NEAR(printed_shares(table), 100.0,
              0.05 * static_cast<double>(s.step_thread.ops.size() + 1))
      << table;
  // What a ResNet-20 step of 8 images computes, twice (Note [Counting FLOPs]).
  Generator generator(0);
  EXPECT_DOUBLE_EQ(
      s.flops,
      2 * 8 * count_training_flops(*make_resnet("resnet20", generator), {3, 32, 32}).total());
  for (const char* op : {"conv2d", "conv2d_backward_weight", "batch_norm2d_relu",
                         "batch_norm2d_add_relu", "sgd_step_multi", "Optimizer.step#SGD.step"}) {
    const auto& ops = s.step_thread.ops;
    EXPECT_TRUE(std::any_of(ops.begin(), ops.end(), [&](const auto& o) { return o.name == op; }))
        << op;
  }
}

}  // namespace
}  // namespace tandem::nn
