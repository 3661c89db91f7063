#include "data/integrity.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "engine/error.h"

namespace tandem::data {
namespace {

// An MD5 digest being computed; owns OpenSSL's context.
class Md5 {
 public:
  Md5() : context_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    // EVP_md5() is refused by a libcrypto in FIPS mode: say so rather than fail later.
    TANDEM_CHECK(context_ != nullptr && EVP_DigestInit_ex(context_.get(), EVP_md5(), nullptr) == 1,
                 "[md5] OpenSSL's libcrypto cannot compute MD5 here (a FIPS-only configuration?)");
  }
  void update(const void* bytes, size_t size) {
    TANDEM_CHECK(EVP_DigestUpdate(context_.get(), bytes, size) == 1, "[md5] digest update failed");
  }
  std::string hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    TANDEM_CHECK(EVP_DigestFinal_ex(context_.get(), digest, &size) == 1, "[md5] digest failed");
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string text;
    for (unsigned int i = 0; i < size; ++i) {
      text += kDigits[digest[i] >> 4];
      text += kDigits[digest[i] & 15];
    }
    return text;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context_;
};

// What a stamp records of a file besides its md5 (Note [md5 stamps]).
struct FileIdentity {
  int64_t size = -1;
  int64_t mtime_ns = -1;
  uint64_t inode = 0;
  bool operator==(const FileIdentity&) const = default;
};

// Follows a symbolic link, as reading the file does; nullopt (and errno) when there is no file.
std::optional<FileIdentity> identity_of(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return std::nullopt;
  return FileIdentity{static_cast<int64_t>(info.st_size),
                      static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 +
                          static_cast<int64_t>(info.st_mtim.tv_nsec),
                      static_cast<uint64_t>(info.st_ino)};
}

struct StampEntry {
  std::string md5;
  FileIdentity identity;
};
using Stamp = std::map<std::string, StampEntry>;  // by file name

// A missing or unreadable stamp, or a line of another shape, only means more files to hash.
Stamp read_stamp(const std::string& path) {
  Stamp stamp;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    StampEntry entry;
    std::string name;
    if (fields >> entry.md5 >> entry.identity.size >> entry.identity.mtime_ns >>
            entry.identity.inode &&
        std::getline(fields >> std::ws, name)) {
      stamp[name] = entry;
    }
  }
  return stamp;
}

// Whole or not at all: written beside and renamed, so a rank checking the same folder at the same
// moment reads the old stamp or the new one. Failures are ignored (the header's contract).
void write_stamp(const std::string& path, const Stamp& stamp) {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << "# Files that matched their md5 sums, as they were then (Tandem: Note [md5 stamps] "
           "in data/integrity.h): md5 size mtime_ns inode name. Delete to check them again.\n";
    for (const auto& [name, entry] : stamp) {
      out << entry.md5 << ' ' << entry.identity.size << ' ' << entry.identity.mtime_ns << ' '
          << entry.identity.inode << ' ' << name << '\n';
    }
    if (!out.flush()) {
      std::filesystem::remove(temporary, error);
      return;
    }
  }
  std::filesystem::rename(temporary, path, error);
  if (error) std::filesystem::remove(temporary, error);
}

// "; the md5 of data_batch_1.bin" when `md5` is another listed file's: a swap or a copy.
std::string listed_as(const std::string& md5, const Md5Sums& expected) {
  for (const auto& [name, sum] : expected) {
    if (sum == md5) return ", which is " + name + "'s";
  }
  return "";
}

}  // namespace

Md5Sums parse_md5_sums(const std::string& text, const std::string& source) {
  Md5Sums sums;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    // md5sum writes "HEX  PATH" (text mode) or "HEX *PATH" (binary mode).
    const bool hex = line.size() > 34 && line.find_first_not_of("0123456789abcdef") == 32 &&
                     line[32] == ' ' && (line[33] == ' ' || line[33] == '*');
    TANDEM_CHECK(hex, "[md5] ", source, ": the line '", line,
                 "' is not md5sum's 'HEX  FILE' (32 lower-case hex digits, two spaces, a name)");
    const std::string path = line.substr(34);
    sums[path.substr(path.find_last_of('/') + 1)] = line.substr(0, 32);
  }
  return sums;
}

Md5Sums read_md5_sums(const std::string& path) {
  std::ifstream in(path);
  TANDEM_CHECK(in.good(), "[md5] cannot read ", path, ": ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_md5_sums(text.str(), path);
}

std::string file_md5(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK(in.good(), "[md5] cannot open ", path, ": ", std::strerror(errno));
  Md5 md5;
  std::vector<char> chunk(size_t{1} << 20);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    md5.update(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  TANDEM_CHECK(!in.bad(), "[md5] cannot read ", path, ": ", std::strerror(errno));
  return md5.hex();
}

std::string md5_stamp_path(const std::string& folder) {
  if (::access(folder.c_str(), W_OK) == 0) return folder + "/" + kMd5StampName;
  // A read-only folder (a shared copy): the XDG base-directory place for a user's caches.
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string base;
  if (cache != nullptr && cache[0] == '/') {
    base = cache;
  } else if (home != nullptr && home[0] != '\0') {
    base = std::string(home) + "/.cache";
  } else {
    return "";
  }
  std::error_code error;
  const std::string absolute = std::filesystem::absolute(folder, error).lexically_normal().string();
  Md5 name;
  name.update(absolute.data(), absolute.size());
  return base + "/tandem/md5-stamps/" + name.hex();
}

void check_md5_sums(const std::string& folder, const std::vector<std::string>& names,
                    const Md5Sums& expected, const Md5CheckOptions& options) {
  const std::string remedy = options.remedy.empty() ? "" : "; " + options.remedy;
  Stamp stamp = options.stamp.empty() ? Stamp{} : read_stamp(options.stamp);
  bool hashed = false;
  for (const std::string& name : names) {
    const std::string path = folder + "/" + name;
    const auto wanted = expected.find(name);
    TANDEM_CHECK(wanted != expected.end(), options.op, " ", path,
                 " has no md5 sum in the list to check it against", remedy);
    // Before the hash: a file changed while it is read then fails the next check's comparison.
    const std::optional<FileIdentity> identity = identity_of(path);
    TANDEM_CHECK(identity.has_value(), options.op, " cannot read ", path, ": ",
                 std::strerror(errno), remedy);
    const auto known = stamp.find(name);
    if (known != stamp.end() && known->second.md5 == wanted->second &&
        known->second.identity == *identity) {
      continue;
    }
    const std::string md5 = file_md5(path);
    TANDEM_CHECK(md5 == wanted->second, options.op, " ", path, " does not match its md5 sum (", md5,
                 listed_as(md5, expected), "; expected ", wanted->second,
                 "): damaged, or another file under its name", remedy);
    stamp[name] = {md5, *identity};
    hashed = true;
  }
  if (hashed && !options.stamp.empty()) write_stamp(options.stamp, stamp);
}

}  // namespace tandem::data
