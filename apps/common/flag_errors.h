#pragma once
/// Flag errors a user can act on, each saying what to type instead: an unknown flag names the
/// closest real one ("--epoch: unknown flag; did you mean --epochs?", also for torchrun's
/// underscore spellings such as --batch_size), and --lr and friends say "must be > 0" instead of
/// CLI11's 309-digit range.

#include <string>
#include <vector>

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace tandem::apps {

/// The app's long flag closest to `unknown` (dashes and underscores alike, at most 2 edits
/// away and less than half the name, or one it begins), or "" when none is.
std::string closest_flag(const CLI::App& app, const std::string& unknown);

/// One line for arguments CLI11 did not expect: each unknown flag with its nearest real one.
std::string unexpected_arguments_message(const CLI::App& app,
                                         const std::vector<std::string>& arguments);

/// A check for a number that must be > 0: "must be > 0, got -0.1"; "must be a number > 0, got
/// 'abc'".
CLI::Validator positive_number();
/// The same for >= 0 (a seed, which an unsigned flag would otherwise take from "-1" wrapped
/// round to 2^64 - 1; a grace period).
CLI::Validator non_negative_number();

/// A check for a whole number that must be > 0 (a count): "must be > 0, got 0"; "must be a whole
/// number > 0, got 'abc'" (also for 1.5, and for one too large for an int).
CLI::Validator positive_count();

}  // namespace tandem::apps
