#include "apps/common/output_paths.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/error.h"

namespace tandem::apps {
namespace {

namespace fs = std::filesystem;

// "4.3 MB": rounded down to a tenth, so a shortfall never reads as enough.
std::string megabytes(uint64_t bytes) {
  const uint64_t tenths = bytes / 100000;
  return detail::concat(tenths / 10, ".", tenths % 10, " MB");
}

// Whether this process can create files in `folder`: the one test that covers permissions,
// read-only mounts, ACLs and full inode tables alike. Empty when it can, else why not.
std::string why_folder_is_not_writable(const fs::path& folder) {
  const std::string probe =
      (folder / (".tandem-write-test." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  return "";
}

}  // namespace

uint64_t existing_file_bytes(const std::string& path) {
  std::error_code error;
  const uint64_t size = fs::file_size(path, error);
  return error ? 0 : size;
}

void check_output_path(const std::string& program, const std::string& flag, const std::string& path,
                       uint64_t bytes_needed, uint64_t bytes_reused) {
  const std::string what = detail::concat("[", program, "] ", flag, " ", path, ": ");
  TANDEM_CHECK(!path.empty(), "[", program, "] ", flag, " needs a file name");
  TANDEM_CHECK(!fs::is_directory(path), what, "is a folder; name a file in it, e.g. ",
               (fs::path(path) / "run").string());
  const fs::path folder = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : ".";
  TANDEM_CHECK(fs::is_directory(folder), what, "the folder ", folder.string(),
               " does not exist; create it first");
  const std::string why = why_folder_is_not_writable(folder);
  TANDEM_CHECK(why.empty(), what, "cannot write in ", folder.string(), " (", why, ")");
  struct statvfs space {};
  if (bytes_needed == 0 || ::statvfs(folder.c_str(), &space) != 0) return;
  const uint64_t free = static_cast<uint64_t>(space.f_bavail) * space.f_frsize + bytes_reused;
  TANDEM_CHECK(free >= bytes_needed, what, folder.string(), " has ", megabytes(free), " free, but ",
               megabytes(bytes_needed),
               " are needed; free some space or choose "
               "another place");
}

void check_replaceable(const std::string& program, const std::string& flag,
                       const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::symlink_status(path, error);
  if (error || status.type() == fs::file_type::not_found ||
      status.type() == fs::file_type::regular || status.type() == fs::file_type::directory) {
    return;  // a folder is check_output_path()'s to name
  }
  const bool link = status.type() == fs::file_type::symlink;
  TANDEM_FAIL("[", program, "] ", flag, " ", path, ": is ",
              link ? "a symbolic link" : "not a regular file (a device, pipe or socket)",
              link ? "; a save replaces the link itself, not what it names: name the target"
                   : ", which a save would replace: name a file",
              link ? detail::concat(" (", fs::weakly_canonical(path, error).string(), ")") : "",
              " or another path");
}

namespace {

// The same path once made absolute, with "." and ".." and symbolic links resolved. Hard links are
// not compared: a checkpoint's previous pair is a hard link of it between saves, by design (Note
// [Checkpoint atomicity] in nn/checkpoint.h).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  const fs::path resolved_a = fs::weakly_canonical(fs::absolute(a), error);
  const fs::path resolved_b = fs::weakly_canonical(fs::absolute(b), error);
  return !error && resolved_a == resolved_b;
}

}  // namespace

void check_distinct_outputs(const std::string& program, const std::vector<OutputFile>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      if (outputs[i].path.empty() || outputs[j].path.empty()) continue;
      TANDEM_CHECK(!same_file(outputs[i].path, outputs[j].path), "[", program, "] ",
                   outputs[j].named_by, " ", outputs[j].path, " is also ", outputs[i].named_by,
                   " (", outputs[i].path,
                   "), which would overwrite it: give each output its own file");
    }
  }
}

}  // namespace tandem::apps
