#pragma once
/// Output files checked before the work that fills them: a --save, --log-json or --json path that
/// cannot be written is one line at once, naming the user's path and why, instead of an error
/// after an epoch (or a whole benchmark) of work, or an orphan file beside it.

#include <cstdint>
#include <string>

namespace tandem::apps {

/// Checks that `path` can be created or replaced, and that its folder has `bytes_needed` free
/// (beyond the `bytes_reused` that files being replaced already hold). Throws a tandem::Error
/// "[program] --flag PATH: why; what to do" when it is a folder, its folder is missing or not
/// writable (tried by creating and removing a file there), or the space is short.
void check_output_path(const std::string& program, const std::string& flag, const std::string& path,
                       uint64_t bytes_needed = 0, uint64_t bytes_reused = 0);

/// The size of the file at `path`, or 0 when there is none.
uint64_t existing_file_bytes(const std::string& path);

}  // namespace tandem::apps
