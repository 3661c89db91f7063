#pragma once
/// Output files checked before the work that fills them: a --save, --log-json or --json path that
/// cannot be written is one line at once, naming the user's path and why, instead of an error
/// after an epoch (or a whole benchmark) of work, or an orphan file beside it.

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::apps {

/// Checks that `path` can be created or replaced, and that its folder has `bytes_needed` free
/// (beyond the `bytes_reused` that files being replaced already hold). Throws a tandem::Error
/// "[program] --flag PATH: why; what to do" when it is a folder, its folder is missing or not
/// writable (tried by creating and removing a file there), or the space is short.
void check_output_path(const std::string& program, const std::string& flag, const std::string& path,
                       uint64_t bytes_needed = 0, uint64_t bytes_reused = 0);

/// Checks that `path`, which is written by a rename over whatever is there (a checkpoint), would
/// replace nothing but a regular file: a device, a pipe or a socket there would be replaced by the
/// file, and a symbolic link would be replaced itself, not what it names. Throws "[program] --flag
/// PATH: is a symbolic link; ..." for those (a folder is check_output_path()'s to name).
void check_replaceable(const std::string& program, const std::string& flag,
                       const std::string& path);

/// One file a run writes, and how the user named it ("--save's sidecar", "--log-json").
struct OutputFile {
  std::string path;
  std::string named_by;
};

/// Checks that a run's outputs are different files (after "./" and "..", and symbolic links):
/// throws "[program] --log-json X is also --save's sidecar; give each output its own file"
/// otherwise, where one would overwrite the other. Empty paths are outputs not asked for.
void check_distinct_outputs(const std::string& program, const std::vector<OutputFile>& outputs);

/// The size of the file at `path`, or 0 when there is none.
uint64_t existing_file_bytes(const std::string& path);

}  // namespace tandem::apps
