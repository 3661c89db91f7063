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

}  // namespace tandem::apps
