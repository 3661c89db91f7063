#include "apps/train_cifar/run_position.h"

#include <cstdio>
#include <filesystem>

#include "engine/error.h"

namespace tandem::apps {
namespace {

// Doubles in metadata keep every bit (%.17g round-trips).
std::string exact(double value) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

double number_at(const nn::Metadata& extra, const std::string& key, const std::string& path) {
  const auto found = extra.find(key);
  TANDEM_CHECK(found != extra.end(), "[train_cifar] ", path,
               " is a mid-epoch checkpoint without its '", key, "'");
  try {
    return std::stod(found->second);
  } catch (const std::exception&) {
    TANDEM_FAIL("[train_cifar] ", path, " has a malformed '", key, "': '", found->second, "'");
  }
}

// What the batches of an epoch depend on beside the seed's order (Note [Mid-epoch checkpoints]).
std::string batch_layout(const TrainOptions& options, int world_size) {
  return detail::concat("global batch ", options.batch_size, " over ", world_size,
                        world_size == 1 ? " rank" : " ranks", ", --accumulate ", options.accumulate,
                        ", --subset ", options.subset, options.drop_last ? ", --drop-last" : "",
                        ", --seed ", options.setup.seed);
}

// The settings a run's schedule and data depend on, as flags and their values (Note [A resume
// knows its run]); `epochs` and `seed` may change on resume, the others may not.
std::vector<std::pair<std::string, std::string>> run_settings(const TrainOptions& o) {
  char lr[32];
  std::snprintf(lr, sizeof(lr), "%.7g", static_cast<double>(o.setup.sgd.lr));  // a float's digits
  return {{"--batch-size", std::to_string(o.batch_size)},
          {"--schedule", schedule_name(o.schedule)},
          {"--lr", lr},
          {"--warmup-epochs", exact(o.warmup_epochs)},
          {"--accumulate", std::to_string(o.accumulate)},
          {"--subset", std::to_string(o.subset)},
          {"--drop-last", o.drop_last ? "yes" : "no"},
          {"--epochs", std::to_string(o.epochs)},
          {"--seed", std::to_string(o.setup.seed)}};
}

bool may_change(const std::string& flag) {
  return flag == "--epochs" || flag == "--seed";
}

}  // namespace

std::vector<std::string> check_resume_settings(const nn::Metadata& saved,
                                               const TrainOptions& options,
                                               const std::string& path) {
  const auto arch = saved.find("arch");
  TANDEM_CHECK(arch == saved.end() || arch->second == options.setup.arch, "[train_cifar] ", path,
               " holds a ", arch->second, ", not a ", options.setup.arch, " (pass --arch ",
               arch->second, ")");
  if (options.eval_only) return {};  // evaluation takes any batch or schedule
  std::string theirs, mine;
  std::vector<std::string> warnings;
  for (const auto& [flag, value] : run_settings(options)) {
    const auto found = saved.find("run" + flag);
    if (found == saved.end() || found->second == value) continue;
    if (may_change(flag)) {
      warnings.push_back(detail::concat(
          "train_cifar: warning: ", path, " was trained with ", flag, " ", found->second,
          "; this run uses ", value,
          flag == "--epochs" ? ": the learning-rate schedule is stretched to the new length"
                             : ": the data order of the epochs to come follows the new seed"));
      continue;
    }
    theirs += " " + flag + " " + found->second;
    mine += " " + flag + " " + value;
  }
  TANDEM_CHECK(theirs.empty(), "[train_cifar] ", path, " was trained with", theirs,
               "; this run asks for", mine,
               ", which would change the learning-rate schedule of the steps to come: resume with "
               "the saved values, or start afresh without --resume");
  return warnings;
}

int saved_world_size(const nn::Metadata& extra, int otherwise) {
  const auto found = extra.find("world_size");
  if (found == extra.end()) return otherwise;
  try {
    return std::stoi(found->second);
  } catch (const std::exception&) {
    return otherwise;
  }
}

std::string resume_source(const TrainOptions& options) {
  if (!options.resume.automatic) {
    // --resume PATH.state names the pair by its sidecar (unless it is a pair's weights itself).
    const std::string& path = options.resume.path;
    const std::string suffix = nn::sidecar_path("");
    if (path.size() > suffix.size() && path.ends_with(suffix) &&
        !std::filesystem::exists(nn::sidecar_path(path))) {
      std::string weights = path.substr(0, path.size() - suffix.size());
      if (std::filesystem::is_regular_file(weights)) return weights;
    }
    return path;
  }
  return automatic_resume_source(options.save);
}

// Note [Resume auto never starts over]: --resume auto is what a job script passes on every
// (re)start, so it must tell "nothing saved yet" from "something saved that cannot be loaded".
// The weights file is renamed into place last (Note [Checkpoint atomicity]), so a weights file at
// PATH or PATH.prev means a save completed there once: if neither pair loads now (a flipped bit,
// a truncated file, a pair mixed from two runs), starting afresh would redo the run and its
// first save would replace the files, so it refuses and changes nothing. A sidecar alone is an
// interrupted first save: nothing finished, so the run starts afresh, as before.
std::string automatic_resume_source(const std::string& save) {
  if (nn::has_checkpoint(save)) return save;
  const std::string previous = nn::previous_path(save);
  if (!std::filesystem::exists(save) && !std::filesystem::exists(previous)) return "";
  std::string why = nn::checkpoint_problem(save);
  if (std::filesystem::exists(previous)) why += "; " + nn::checkpoint_problem(previous);
  TANDEM_FAIL("[train_cifar] --resume auto: the checkpoint at ", save,
              " cannot be loaded and there is no usable earlier one (", why,
              "); nothing was changed. To keep it, move it away or --save elsewhere; to start "
              "afresh over it, run without --resume and with --overwrite");
}

nn::TrainingState training_state_at(const RunPosition& position, const TrainOptions& options,
                                    int world_size) {
  nn::TrainingState state{.epoch = position.epoch, .step = position.step};
  state.extra["arch"] = options.setup.arch;
  state.extra["mode"] = mode_name(options.setup.mode);
  // Informational: the weights are float32 in either precision, so any run may resume them.
  state.extra["precision"] = nn::precision_name(options.setup.precision);
  for (const auto& [flag, value] : run_settings(options)) state.extra["run" + flag] = value;
  state.extra["world_size"] = std::to_string(world_size);
  if (position.batch == 0) return state;
  state.extra["epoch_batches"] = std::to_string(position.batch);
  state.extra["epoch_loss_sum"] = exact(position.so_far.loss_sum);
  state.extra["epoch_correct"] = exact(position.so_far.correct);
  state.extra["epoch_images"] = std::to_string(position.so_far.images);
  state.extra["epoch_seconds"] = exact(position.so_far.seconds);
  state.extra["batch_layout"] = batch_layout(options, world_size);
  return state;
}

RunPosition position_from(const nn::TrainingState& state, const TrainOptions& options,
                          int world_size, const std::string& path) {
  RunPosition position{.epoch = static_cast<int>(state.epoch), .step = state.step};
  if (state.extra.count("epoch_batches") == 0) return position;
  // Note [Resume at another world size] (checkpoint_keeper.cpp): the layout is compared at the
  // saving run's world size where the checkpoint records it (older ones: at this run's).
  const auto layout = state.extra.find("batch_layout");
  const int saved_world = saved_world_size(state.extra, world_size);
  TANDEM_CHECK(layout != state.extra.end() && layout->second == batch_layout(options, saved_world),
               "[train_cifar] ", path, " was saved in the middle of epoch ", state.epoch + 1,
               " by a run with ",
               layout == state.extra.end() ? "an unrecorded layout" : layout->second,
               "; this run has ", batch_layout(options, world_size),
               ": resume it with the same values (its batches would differ otherwise)");
  const auto count = [&](const char* key) {
    return static_cast<int64_t>(number_at(state.extra, key, path));
  };
  position.batch = count("epoch_batches");
  position.so_far = {.loss_sum = number_at(state.extra, "epoch_loss_sum", path),
                     .correct = number_at(state.extra, "epoch_correct", path),
                     .images = count("epoch_images"),
                     .seconds = number_at(state.extra, "epoch_seconds", path)};
  return position;
}

}  // namespace tandem::apps
