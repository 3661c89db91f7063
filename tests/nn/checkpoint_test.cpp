#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>
#include <tuple>

#include <filesystem>

#include "engine/tandem.h"
#include "nn/checkpoint.h"
#include "nn/resnet.h"
#include "tests/support/ddp_fixtures.h"
#include "tests/support/error_message.h"
#include "tests/support/small_disk.h"
#include "tests/support/temp_dir.h"

namespace tandem::nn {
namespace {

namespace fs = std::filesystem;

struct TrainingRun {
  std::shared_ptr<ResNet> model;
  std::unique_ptr<Sgd> optimizer;
};

TrainingRun make_run(uint64_t seed) {
  Generator generator(seed);
  TrainingRun run{make_resnet("resnet20", generator), nullptr};
  run.optimizer = std::make_unique<Sgd>(
      run.model->parameters(), SgdConfig{.lr = 0.05f, .momentum = 0.9f, .weight_decay = 5e-4f});
  return run;
}

void train_steps(TrainingRun& run, Generator& data, int steps) {
  for (int i = 0; i < steps; ++i) {
    const Tensor images = randn({8, 3, 32, 32}, data);
    std::vector<int64_t> labels(8);
    for (auto& label : labels) label = static_cast<int64_t>(data.next_u64() % 10);
    run.optimizer->zero_grad();
    cross_entropy((*run.model)(images), from_vector(labels, {8}, {.dtype = DType::Int64}))
        .backward();
    run.optimizer->step();
  }
}

class Checkpoint : public ::testing::Test {
 protected:
  std::string path() const { return dir_.file("ckpt.safetensors"); }
  testing::TempDir dir_;
};

TEST_F(Checkpoint, ResumedRunContinuesExactly) {
  // Reference: 4 steps straight. Resumed: 2 steps, save, load into a fresh run, 2 more steps.
  TrainingRun reference = make_run(1);
  Generator reference_data(9);
  train_steps(reference, reference_data, 4);

  TrainingRun first = make_run(1);
  Generator data(9);
  train_steps(first, data, 2);
  save_checkpoint(
      path(), *first.model, *first.optimizer,
      {.epoch = 1, .step = 2, .rng_state = data.state(), .extra = {{"arch", "resnet20"}}});

  TrainingRun resumed =
      make_run(77);  // different initial weights: all must come from the checkpoint
  const TrainingState state = load_checkpoint(path(), *resumed.model, *resumed.optimizer);
  EXPECT_EQ(state.epoch, 1);
  EXPECT_EQ(state.step, 2);
  EXPECT_EQ(state.extra.at("arch"), "resnet20");
  Generator resumed_data;
  resumed_data.set_state(state.rng_state);
  train_steps(resumed, resumed_data, 2);

  const NamedTensors expected = reference.model->state_dict(), actual = resumed.model->state_dict();
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i].second.dtype() == DType::Float32) {
      EXPECT_EQ(expected[i].second.to_vector<float>(), actual[i].second.to_vector<float>())
          << expected[i].first;
    } else {
      EXPECT_EQ(expected[i].second.item(), actual[i].second.item()) << expected[i].first;
    }
  }
}

// Review S10: a sidecar whose momentum has another dtype, or whose epoch is not a whole int, is
// refused before anything changes (the momentum used to load and fail at the first step).
TEST_F(Checkpoint, AMomentumOfAnotherDtypeOrABadEpochIsRefusedBeforeAnythingChanges) {
  TrainingRun saved = make_run(2);
  Generator data(3);
  train_steps(saved, data, 1);
  save_checkpoint(path(), *saved.model, *saved.optimizer, {.epoch = 1, .step = 1});
  const SafetensorsFile good = load_safetensors(sidecar_path(path()));
  const auto refusal = [&](const NamedTensors& tensors, const Metadata& metadata) {
    save_safetensors(sidecar_path(path()), tensors, metadata);
    TrainingRun fresh = make_run(77);
    const std::vector<float> before = fresh.model->state_dict()[0].second.to_vector<float>();
    const std::string message =
        testing::error_message([&] { load_checkpoint(path(), *fresh.model, *fresh.optimizer); });
    EXPECT_EQ(fresh.model->state_dict()[0].second.to_vector<float>(), before) << message;
    return message;
  };
  NamedTensors retyped = good.tensors;
  retyped[0].second = zeros(retyped[0].second.shape(), {.dtype = DType::Float16});
  const std::string dtype = refusal(retyped, good.metadata);
  EXPECT_NE(dtype.find("[checkpoint] momentum of '" + retyped[0].first.substr(9) + "' in " +
                       sidecar_path(path()) + " is float16, parameter is float32"),
            std::string::npos)
      << dtype;
  for (const char* epoch : {"12abc", "4294967297", "-2147483648", " 1", ""}) {
    Metadata metadata = good.metadata;
    metadata["epoch"] = epoch;
    const std::string message = refusal(good.tensors, metadata);
    EXPECT_NE(message.find("'epoch' is not an integer from 0 to 2147483647: '" +
                           std::string(epoch) + "'"),
              std::string::npos)
        << message;
  }
}

// Review S8: the `.linking` names a save passes its previous pair through never follow a
// symlink planted there.
TEST_F(Checkpoint, SymlinksAtTheLinkingNamesAreNotFollowed) {
  TrainingRun run = make_run(2);
  const std::string victim = dir_.file("victim.txt");
  std::ofstream(victim) << "precious data";
  for (const std::string& name : {previous_path(path()), sidecar_path(previous_path(path()))}) {
    fs::create_symlink(victim, name + ".linking");
  }
  save_checkpoint(path(), *run.model, *run.optimizer, {.epoch = 1});
  save_checkpoint(path(), *run.model, *run.optimizer, {.epoch = 2});
  std::ifstream in(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "precious data");
  EXPECT_EQ(load_checkpoint(previous_path(path()), *run.model, *run.optimizer).epoch, 1);
}

TEST_F(Checkpoint, MismatchedOrMissingSidecarFallsBackToThePreviousPair) {
  TrainingRun run = make_run(2);
  Generator data(3);
  train_steps(run, data, 1);
  EXPECT_FALSE(has_checkpoint(path()));
  save_checkpoint(path(), *run.model, *run.optimizer, {.epoch = 1});
  EXPECT_TRUE(has_checkpoint(path()));
  fs::copy_file(sidecar_path(path()), dir_.path() / "old.state");
  save_checkpoint(path(), *run.model, *run.optimizer, {.epoch = 2});
  // A new sidecar beside old weights, as a crash between the two renames of a save leaves them
  // (Note [Checkpoint atomicity]): the previous pair, one save older, loads instead.
  fs::copy_file(dir_.path() / "old.state", sidecar_path(path()),
                fs::copy_options::overwrite_existing);
  const TrainingState state = load_checkpoint(path(), *run.model, *run.optimizer);
  EXPECT_EQ(state.epoch, 1);
  EXPECT_NE(state.fell_back_because.find("come from different saves"), std::string::npos)
      << state.fell_back_because;

  EXPECT_TRUE(has_checkpoint(path()));  // the previous pair

  // Without a usable previous pair, the error stands.
  fs::remove(previous_path(path()));
  EXPECT_FALSE(has_checkpoint(path()));  // what an interrupted first save leaves
  try {
    load_checkpoint(path(), *run.model, *run.optimizer);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("come from different saves"), std::string::npos)
        << e.what();
  }
  fs::remove(sidecar_path(path()));
  EXPECT_THROW(load_checkpoint(path(), *run.model, *run.optimizer), Error);
}

TEST_F(Checkpoint, AKillAtAnyMomentOfManySavesLeavesALoadablePair) {
  // A child process saves over and over; it is killed at random moments, and after each kill a
  // pair loads: the current one, or the previous one when the kill fell between the renames.
  TrainingRun run = make_run(2);
  Generator data(3);
  train_steps(run, data, 1);
  save_checkpoint(path(), *run.model, *run.optimizer, {.epoch = 0});
  std::mt19937 random(5);
  int fell_back = 0;
  for (int kill = 0; kill < 25; ++kill) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int64_t epoch = 1;; ++epoch) {
        save_checkpoint(path(), *run.model, *run.optimizer, {.epoch = epoch});
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + random() % 30000));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    TrainingState state;
    ASSERT_NO_THROW(state = load_checkpoint(path(), *run.model, *run.optimizer)) << "kill " << kill;
    fell_back += state.fell_back_because.empty() ? 0 : 1;
  }
  std::printf("fell back to the previous pair after %d of 25 kills\n", fell_back);
}

// A disk that fills up during a save: a one-line error naming the file and the cause, no
// temporary left behind, and the previous checkpoint still loads (issue: faults that lose
// nothing). 3 MiB holds one ResNet-20 pair (2 × 1.1 MB) but not a second one beside it.
TEST_F(Checkpoint, AFullDiskFailsTheSaveAndKeepsThePreviousCheckpoint) {
  const std::string folder = dir_.file("small_disk");
  testing::SmallDisk disk(folder, "3m");
  if (!disk.mounted()) GTEST_SKIP() << disk.reason();
  const std::string path = folder + "/ckpt";
  TrainingRun run = make_run(3);
  Generator data(4);
  train_steps(run, data, 1);
  save_checkpoint(path, *run.model, *run.optimizer, {.epoch = 1, .step = 1});
  const auto saved = run.model->state_dict();
  std::vector<std::vector<float>> expected;
  for (const auto& [name, tensor] : saved)
    expected.push_back(tensor.to(DType::Float32).to_vector<float>());

  train_steps(run, data, 1);
  std::string message;
  try {
    save_checkpoint(path, *run.model, *run.optimizer, {.epoch = 2, .step = 2});
  } catch (const Error& e) {
    message = e.message();
  }
  ASSERT_FALSE(message.empty()) << "the second save fitted: the disk is not small enough";
  std::printf("the save on a full disk: %s\n", message.c_str());
  EXPECT_NE(message.find("No space left on device"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  for (const auto& entry : fs::directory_iterator(folder)) {
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
  }

  TrainingRun resumed = make_run(9);
  const TrainingState state = load_checkpoint(path, *resumed.model, *resumed.optimizer);
  EXPECT_EQ(state.epoch, 1);
  // The pair at `path` is whole again: the failed save left no new sidecar beside old weights.
  EXPECT_EQ(state.fell_back_because, "");
  const auto loaded = resumed.model->state_dict();
  for (size_t i = 0; i < loaded.size(); ++i) {
    EXPECT_EQ(loaded[i].second.to(DType::Float32).to_vector<float>(), expected[i])
        << loaded[i].first;
  }
}

// The weights are what differ between two models; their momentum only follows them.
TEST_F(Checkpoint, AnotherModelsCheckpointIsNamedByItsWeights) {
  TrainingRun run = make_run(1);
  Generator data(2);
  train_steps(run, data, 1);  // momentum buffers to save
  save_checkpoint(path(), *run.model, *run.optimizer, {});
  Generator generator(3);
  TrainingRun wider{make_resnet("resnet18", generator), nullptr};
  wider.optimizer = std::make_unique<Sgd>(wider.model->parameters(), SgdConfig{.momentum = 0.9f});
  const std::string error =
      testing::error_message([&] { load_checkpoint(path(), *wider.model, *wider.optimizer); });
  EXPECT_EQ(error.rfind("[load_state_dict] 'conv1.weight': checkpoint has [16, 3, 3, 3]", 0), 0u)
      << error;
}

TEST_F(Checkpoint, OptimizerMustCoverTheModel) {
  TrainingRun run = make_run(4);
  Sgd partial({run.model->parameters().front()}, {});
  EXPECT_THROW(save_checkpoint(path(), *run.model, partial, {}), Error);
}

// A run that scales its loss (nn/grad_scaler.h): a small network, its optimizer and its scaler,
// with factors that do not round to powers of two and a short growth interval, so that the scale
// and the tracker after a few steps are values a resume could get wrong.
struct ScaledRun {
  explicit ScaledRun(uint64_t seed)
      : model(testing::small_net(seed)),
        optimizer(model->parameters(), {.lr = 0.1f, .momentum = 0.9f}),
        scaler({.init_scale = 3.0f,
                .growth_factor = 1.37,
                .backoff_factor = 0.6,
                .growth_interval = 3}) {}

  // Steps [from, to); the gradients of every fifth overflow (a loss too large for float32).
  void train(int from, int to) {
    const Tensor labels = from_vector<int64_t>({0, 1, 2, 0}, {4});
    for (int step = from; step < to; ++step) {
      optimizer.zero_grad();
      Tensor loss = cross_entropy(model->forward(testing::small_net_batch(0, step)), labels);
      if (step % 5 == 4) loss = mul(loss, 1e38f);
      scaler.scale(loss).backward();
      scaler.step(optimizer);
      scaler.update();
    }
  }

  std::shared_ptr<Sequential> model;
  Sgd optimizer;
  GradScaler scaler;
};

// Note [Scaler in the sidecar].
TEST_F(Checkpoint, AResumedRunScalesAsTheUninterruptedOne) {
  ScaledRun reference(1);
  reference.train(0, 13);

  ScaledRun first(1);
  first.train(0, 7);
  save_checkpoint(path(), *first.model, first.optimizer,
                  {.step = 7, .grad_scaler = first.scaler.state_dict()});
  ScaledRun resumed(77);  // other weights, a fresh scaler: all must come from the checkpoint
  const TrainingState state = load_checkpoint(path(), *resumed.model, resumed.optimizer);
  ASSERT_TRUE(state.grad_scaler.has_value());
  EXPECT_EQ(*state.grad_scaler, *first.scaler.state_dict());
  EXPECT_TRUE(state.extra.empty()) << "the scaler's keys are not the caller's";
  resumed.scaler.load_state_dict(*state.grad_scaler);
  resumed.train(7, 13);

  EXPECT_EQ(resumed.scaler.state_dict(), reference.scaler.state_dict());
  EXPECT_NE(reference.scaler.get_scale(), 3.0f) << "the scale moved: the test shows something";
  const NamedTensors expected = reference.model->state_dict(), actual = resumed.model->state_dict();
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].second.to_vector<float>(), actual[i].second.to_vector<float>())
        << expected[i].first;
  }
}

// Checkpoints of runs without a scaler, and those saved before scalers existed, are the same file.
TEST_F(Checkpoint, ASidecarWithoutAScalerLoadsWithNone) {
  ScaledRun run(3);
  save_checkpoint(path(), *run.model, run.optimizer, {.step = 1});
  for (const auto& [key, value] : load_safetensors(sidecar_path(path())).metadata) {
    EXPECT_EQ(key.rfind("grad_scaler.", 0), std::string::npos) << key;
  }
  EXPECT_FALSE(load_checkpoint(path(), *run.model, run.optimizer).grad_scaler.has_value());
}

TEST_F(Checkpoint, ADamagedScalerStateIsRefusedBeforeAnythingChanges) {
  ScaledRun saved(2);
  saved.train(0, 2);
  save_checkpoint(path(), *saved.model, saved.optimizer,
                  {.step = 2, .grad_scaler = saved.scaler.state_dict()});
  const SafetensorsFile good = load_safetensors(sidecar_path(path()));
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"grad_scaler.scale", "1e40", "'grad_scaler.scale' is not a number: '1e40'"},
      {"grad_scaler.scale", "0.5x", "'grad_scaler.scale' is not a number: '0.5x'"},
      {"grad_scaler.scale", "-1", "the scale must be finite and > 0, got -1"},
      {"grad_scaler.growth_factor", "1", "growth_factor must be > 1, got 1"},
      {"grad_scaler.growth_tracker", "-1", "'grad_scaler.growth_tracker' is not an integer"},
      {"grad_scaler.growth_interval", "0", "'grad_scaler.growth_interval' is not an integer"},
  };
  for (const auto& [key, value, expected] : cases) {
    Metadata metadata = good.metadata;
    metadata[key] = value;
    save_safetensors(sidecar_path(path()), good.tensors, metadata);
    ScaledRun fresh(77);
    const std::vector<float> before = fresh.model->parameters()[0].to_vector<float>();
    const std::string message =
        testing::error_message([&] { load_checkpoint(path(), *fresh.model, fresh.optimizer); });
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_NE(message.find(sidecar_path(path())), std::string::npos) << message;
    EXPECT_EQ(fresh.model->parameters()[0].to_vector<float>(), before) << message;
  }
}

}  // namespace
}  // namespace tandem::nn
