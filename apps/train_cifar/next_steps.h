#pragma once
/// The commands the end of a run prints (Note [What to do next] in run_report.cpp), built so that
/// they can be pasted as they are: the program's own path, every path in shell quotes where it
/// needs them, and the run's data flags kept.

#include <string>

#include "apps/train_cifar/train_options.h"

namespace tandem::apps {

/// The program as the user can start it again: argv[0] made absolute where it was a path, or the
/// name the shell found on PATH; "train_cifar" without a command line.
std::string program_path(const TrainOptions& options);

/// The run's own command line (TrainOptions::command) again, with --resume CHECKPOINT in place of
/// any --resume or --overwrite it had; "" without a command line.
std::string continue_command(const TrainOptions& options);

/// Evaluating --save's checkpoint on the run's test data: --arch, --eval-only, --resume, and the
/// run's --data-dir (or --synthetic) and --subset.
std::string evaluate_command(const TrainOptions& options);

/// Drawing the run's --log-json: scripts/plot_training.py by its absolute path where this program
/// runs from a build folder of Tandem's checkout (build/apps/train_cifar: the script is two folders
/// up), else by its path in the checkout; the log in shell quotes where it needs them.
std::string plot_command(const TrainOptions& options);

}  // namespace tandem::apps
