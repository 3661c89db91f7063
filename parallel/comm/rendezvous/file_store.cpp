#include "parallel/comm/rendezvous/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <thread>

#include "engine/error.h"
#include "parallel/comm/rendezvous/file_store_records.h"
#include "parallel/comm/rendezvous/store_protocol.h"

namespace tandem::parallel {
namespace {

// Note [FileStore format]: user keys under "/", the store's own under "tandem/".
constexpr const char* kUserPrefix = "/";
constexpr const char* kHeaderKey = "tandem/file_store";  // the first record: who made the file
constexpr const char* kLeftKey = "tandem/left";          // ranks that have left (clean-up count)
constexpr const char* kRefusedKey = "tandem/refused";    // rank 0 found the file stale
constexpr std::chrono::milliseconds kPoll{10};

std::string joined_key(int rank) {
  return "tandem/joined/" + std::to_string(rank);
}

std::string record(const std::string& key, std::string_view value) {
  return protocol::Writer().bytes(key).bytes(value).str();
}

// "rank 0 (pid 4242) on host node0 at 2026-11-28 10:00:01 UTC, for 4 ranks".
std::string creator_description(int world_size) {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char when[32] = {};
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &utc);
  return detail::concat("rank 0 (pid ", ::getpid(), ") on host ", host, " at ", when, ", for ",
                        world_size, world_size == 1 ? " rank" : " ranks");
}

void write_all(int fd, std::string_view bytes, const std::string& address) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    TANDEM_CHECK(n > 0, "[store] ", address, ": write failed: ", std::strerror(errno));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

// The file, opened for one call and locked for its duration (closing it releases the lock).
class FileStore::OpenFile {
 public:
  enum class Lock { Shared, Exclusive };

  OpenFile(const FileStore& store, Lock lock) : address_(store.address()) {
    do {
      // O_NOFOLLOW: a symlink at the path is refused, not read (review S7).
      fd_ = ::open(store.options_.path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    } while (fd_ < 0 && errno == EINTR);
    TANDEM_CHECK(fd_ >= 0 || errno != ELOOP, "[store] ", address_,
                 " is a symbolic link; name the file itself (rank 0 creates it)");
    TANDEM_CHECK(fd_ >= 0 || errno != ENOENT, "[store] ", address_,
                 " was removed while the job used it (by hand, or by another job's last rank)");
    TANDEM_CHECK(fd_ >= 0, "[store] cannot open ", address_, ": ", std::strerror(errno));
    const int operation = lock == Lock::Shared ? LOCK_SH : LOCK_EX;
    int rc = 0;
    do {
      rc = ::flock(fd_, operation);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int error = errno;
      ::close(fd_);
      TANDEM_FAIL("[store] cannot lock ", address_, ": ", std::strerror(error),
                  " (the file system must support flock, as NFS v4 does)");
    }
  }
  ~OpenFile() { ::close(fd_); }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;

  // The file's identity: a file removed and made anew at the same path is another file.
  ino_t inode() const { return status().st_ino; }
  off_t size() const { return status().st_size; }

  std::string read(off_t from, off_t to) const {
    std::string bytes(static_cast<size_t>(to - from), '\0');
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n =
          ::pread(fd_, bytes.data() + done, bytes.size() - done, from + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      TANDEM_CHECK(n > 0, "[store] ", address_,
                   ": read failed: ", n == 0 ? "the file ended early" : std::strerror(errno));
      done += static_cast<size_t>(n);
    }
    return bytes;
  }

  // Needs the exclusive lock: nobody else appends meanwhile.
  void append(std::string_view bytes) const {
    TANDEM_CHECK(::lseek(fd_, 0, SEEK_END) >= 0, "[store] ", address_,
                 ": seek failed: ", std::strerror(errno));
    write_all(fd_, bytes, address_);
  }

 private:
  struct stat status() const {
    struct stat st {};
    TANDEM_CHECK(::fstat(fd_, &st) == 0, "[store] ", address_,
                 ": stat failed: ", std::strerror(errno));
    return st;
  }

  std::string address_;
  int fd_ = -1;
};

FileStore::FileStore(FileStoreOptions options) : options_(std::move(options)) {
  const std::filesystem::path path(options_.path);
  TANDEM_CHECK(path.is_absolute() && path.has_filename(), "[store] ", address(),
               ": the path must be an absolute file name");
  const std::filesystem::path folder = path.parent_path();
  std::error_code error;
  TANDEM_CHECK(std::filesystem::is_directory(folder, error), "[store] ", address(), ": the folder ",
               folder.string(),
               " does not exist (file:// needs a folder that every rank can reach, such as one on "
               "a shared file system)");
  TANDEM_CHECK(!std::filesystem::is_directory(path, error), "[store] ", address(),
               " is a folder; name a file in it (rank 0 creates the file)");
  TANDEM_CHECK(
      options_.world_size >= 1 && options_.rank >= 0 && options_.rank < options_.world_size,
      "[store] ", address(), ": rank ", options_.rank, " is out of range for ", options_.world_size,
      " ranks");
  if (options_.rank == 0) {
    create();
  } else {
    join();
  }
}

FileStore::~FileStore() {
  if (!joined_) return;
  try {
    std::lock_guard<std::mutex> guard(mutex_);
    OpenFile file(*this, OpenFile::Lock::Exclusive);
    // Removed under the lock: a rank that has not left yet cannot be between open and lock.
    // Rank 0 leaving a file that no other rank joined (its rendezvous timed out or failed) also
    // removes it, so the next run is not refused as if a job had crashed (review S7).
    const bool all_left = add_locked(file, kLeftKey, 1) >= options_.world_size;
    if (all_left || (options_.rank == 0 && !others_joined())) ::unlink(options_.path.c_str());
  } catch (...) {
    // The file is gone, replaced or unreadable: there is nothing of this job's to clean up.
  }
}

std::string FileStore::address() const {
  return "file://" + options_.path;
}

// Rank 0: the file, made whole with its first records, or the refusal of one already there.
void FileStore::create() {
  int fd = -1;
  do {
    // 0600: the file holds the job's addresses and NCCL id, for its own user's ranks only.
    fd = ::open(options_.path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0 && errno == EEXIST) {
    std::lock_guard<std::mutex> guard(mutex_);
    OpenFile file(*this, OpenFile::Lock::Exclusive);
    read_new_records(file);  // a file that is not one of ours is refused here, untouched
    TANDEM_CHECK(find(kHeaderKey) != nullptr, "[store] ", address(),
                 " is empty, not a Tandem rendezvous file; name a file that does not exist (rank "
                 "0 creates it)");
    if (find(kRefusedKey) == nullptr) file.append(record(kRefusedKey, ""));
    TANDEM_FAIL(stale_message("already exists"));
  }
  TANDEM_CHECK(fd >= 0, "[store] cannot create ", address(), ": ", std::strerror(errno));
  // Locked before anything is in it: a rank that opens the file meanwhile finds it empty (and
  // waits), never half-written.
  const bool locked = ::flock(fd, LOCK_EX) == 0;
  const std::string first =
      record(kHeaderKey, creator_description(options_.world_size)) + record(joined_key(0), "");
  try {
    TANDEM_CHECK(locked, "[store] cannot lock ", address(), ": ", std::strerror(errno));
    write_all(fd, first, address());
    struct stat st {};
    TANDEM_CHECK(::fstat(fd, &st) == 0, "[store] ", address(),
                 ": stat failed: ", std::strerror(errno));
    inode_ = st.st_ino;
  } catch (...) {
    ::close(fd);
    ::unlink(options_.path.c_str());
    throw;
  }
  ::close(fd);
  joined_ = true;
}

// Ranks but 0: wait for rank 0's file, then enter this rank in it, refusing a stale one.
void FileStore::join() {
  const auto deadline = net::deadline_after(options_.timeout);
  while (true) {
    struct stat st {};
    if (::lstat(options_.path.c_str(), &st) == 0 && st.st_size > 0)
      break;  // a symlink: refused next
    TANDEM_CHECK(net::Clock::now() < deadline, "[store] ", address(), " did not appear within ",
                 net::format_duration(options_.timeout),
                 ": rank 0 creates it; was rank 0 started, with the same path, on a file system "
                 "shared with this machine?");
    std::this_thread::sleep_for(kPoll);
  }
  std::lock_guard<std::mutex> guard(mutex_);
  OpenFile file(*this, OpenFile::Lock::Exclusive);
  refresh(file);
  const std::string rank = std::to_string(options_.rank);
  TANDEM_CHECK(find(joined_key(options_.rank)) == nullptr,
               stale_message("already lists rank " + rank + " (or two processes were given rank " +
                             rank + ")"));
  if (const std::string* left = find(kLeftKey)) {
    TANDEM_FAIL(stale_message("has already been left by " + *left + " of its ranks"));
  }
  file.append(record(joined_key(options_.rank), ""));
  joined_ = true;
}

void FileStore::read_new_records(OpenFile& file) {
  if (inode_ == 0) inode_ = file.inode();
  TANDEM_CHECK(file.inode() == inode_, "[store] ", address(),
               " was replaced by another file while the job used it");
  const off_t size = file.size();
  TANDEM_CHECK(size >= read_up_to_, "[store] ", address(),
               " shrank while the job used it (was it replaced?)");
  // Note [FileStore records]: field by field, each length checked before its bytes are read.
  read_up_to_ = file_store::read_records(
      [&](off_t offset, size_t n) { return file.read(offset, offset + static_cast<off_t>(n)); },
      read_up_to_, size, kHeaderKey, address(),
      [&](std::string key, std::string value) { cache_[std::move(key)] = std::move(value); });
}

bool FileStore::others_joined() const {
  for (int rank = 1; rank < options_.world_size; ++rank) {
    if (find(joined_key(rank)) != nullptr) return true;
  }
  return false;
}

void FileStore::refresh(OpenFile& file) {
  read_new_records(file);
  if (find(kRefusedKey) != nullptr) {
    TANDEM_FAIL(stale_message("was refused by rank 0, which found it already there"));
  }
}

const std::string* FileStore::find(const std::string& key) const {
  const auto it = cache_.find(key);
  return it == cache_.end() ? nullptr : &it->second;
}

std::string FileStore::stale_message(const std::string& why) const {
  const std::string* creator = find(kHeaderKey);
  return detail::concat("[store] ", address(), " ", why, " (made by ",
                        creator ? *creator : std::string("an unknown process"),
                        "): a rendezvous file left by an earlier job that did not end cleanly, "
                        "or one in use by another job; remove it if no job uses it (rm ",
                        options_.path, "), or choose another path");
}

void FileStore::set(const std::string& key, const Bytes& value) {
  TANDEM_CHECK(
      value.size() <= file_store::kMaxFieldBytes && key.size() < file_store::kMaxFieldBytes,
      "[store] set('", key.substr(0, 80), "'): ", key.size(), "-byte key and ", value.size(),
      "-byte value; a store key or value holds at most ", file_store::kMaxFieldBytes, " bytes");
  std::lock_guard<std::mutex> guard(mutex_);
  OpenFile file(*this, OpenFile::Lock::Exclusive);
  file.append(record(kUserPrefix + key, to_string(value)));
}

Bytes FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = net::deadline_after(timeout);
  while (true) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      OpenFile file(*this, OpenFile::Lock::Shared);
      refresh(file);
      if (const std::string* value = find(kUserPrefix + key)) return to_bytes(*value);
    }
    TANDEM_CHECK(net::Clock::now() < deadline, "[store] get('", key, "') timed out after ",
                 net::format_duration(timeout), ": no rank set the key (store at ", address(), ")");
    std::this_thread::sleep_for(kPoll);
  }
}

int64_t FileStore::add_locked(OpenFile& file, const std::string& key, int64_t delta) {
  refresh(file);
  int64_t value = delta;
  if (const std::string* text = find(key)) {
    const std::optional<int64_t> counter = protocol::parse_counter(*text);
    TANDEM_CHECK(counter.has_value(), "[store] add('",
                 key.starts_with(kUserPrefix) ? key.substr(1) : key,
                 "') failed: ", protocol::kNotACounter);
    // Checked: a counter past INT64_MAX would be undefined behaviour, not a wrap (review S9).
    TANDEM_CHECK(!__builtin_add_overflow(value, *counter, &value), "[store] add('",
                 key.starts_with(kUserPrefix) ? key.substr(1) : key, "') failed: ", *counter, " + ",
                 delta, " does not fit in 64 bits");
  }
  file.append(record(key, std::to_string(value)));
  return value;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> guard(mutex_);
  OpenFile file(*this, OpenFile::Lock::Exclusive);
  return add_locked(file, kUserPrefix + key, delta);
}

std::vector<std::string> FileStore::missing(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> guard(mutex_);
  OpenFile file(*this, OpenFile::Lock::Shared);
  refresh(file);
  std::vector<std::string> out;
  for (const std::string& key : keys) {
    if (find(kUserPrefix + key) == nullptr) out.push_back(key);
  }
  return out;
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = net::deadline_after(timeout);
  while (true) {
    const std::vector<std::string> absent = missing(keys);
    if (absent.empty()) return;
    TANDEM_CHECK(net::Clock::now() < deadline, "[store] wait timed out after ",
                 net::format_duration(timeout), "; still missing: ", quoted_keys(absent),
                 " (store at ", address(), ")");
    std::this_thread::sleep_for(kPoll);
  }
}

bool FileStore::check(const std::vector<std::string>& keys) {
  return missing(keys).empty();
}

}  // namespace tandem::parallel
