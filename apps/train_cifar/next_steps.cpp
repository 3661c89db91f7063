#include "apps/train_cifar/next_steps.h"

#include <filesystem>

#include "apps/common/wording.h"

namespace tandem::apps {

std::string program_path(const TrainOptions& options) {
  if (options.command.empty()) return "train_cifar";
  const std::string& argv0 = options.command.front();
  if (argv0.find('/') == std::string::npos) return shell_word(argv0);
  return shell_word(std::filesystem::absolute(argv0).lexically_normal().string());
}

std::string continue_command(const TrainOptions& options) {
  if (options.command.empty()) return "";
  std::string command = program_path(options);
  const std::vector<std::string>& args = options.command;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--overwrite" || args[i].rfind("--resume=", 0) == 0) continue;
    if (args[i] == "--resume") {
      ++i;  // and its value
      continue;
    }
    // Appended in two steps: GCC 12 warns of a false overlap in `" " + std::string&&` (-Wrestrict).
    command += ' ';
    command += shell_word(args[i]);
  }
  return command + " --resume " + shell_word(options.save);
}

std::string evaluate_command(const TrainOptions& options) {
  std::string command = program_path(options) + " --arch " + options.setup.arch +
                        " --eval-only --resume " + shell_word(options.save);
  if (options.synthetic) {
    command += " --synthetic";
  } else if (!options.data_dir.empty()) {
    command += " --data-dir " + shell_word(options.data_dir);
  }
  if (!options.synthetic && !options.verify_data) command += " --no-verify-data";
  if (options.subset > 0) command += " --subset " + std::to_string(options.subset);
  return command;
}

namespace {

// The checkout's plotting script by its absolute path, so the printed line runs from anywhere:
// the first folder above the program that holds it (a build folder may sit at any depth of the
// checkout: build/, build/offline/). Relative when none does (an installed program).
std::string plot_script() {
  constexpr const char* script = "scripts/plot_training.py";
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return script;
  for (std::filesystem::path folder = self.parent_path(); folder.has_relative_path();
       folder = folder.parent_path()) {
    if (std::filesystem::is_regular_file(folder / script, error)) return (folder / script).string();
  }
  return script;
}

}  // namespace

std::string plot_command(const TrainOptions& options) {
  return shell_word(plot_script()) + " " + shell_word(options.log_json);
}

}  // namespace tandem::apps
