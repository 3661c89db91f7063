#pragma once
/// FileStore: the rendezvous store of `file:///PATH` — a file that every rank can reach (a shared
/// file system such as NFS or Lustre; /tmp for the ranks of one machine), for clusters where no
/// port can be opened for a TCP store. It follows PyTorch's FileStore (c10d/FileStore.cpp): an
/// append-only log of records under flock(2), read afresh on every call.
///
///   FileStore store({.path = "/mnt/nfs/job42", .rank = 1, .world_size = 4});
///   store.set("rank1/address", to_bytes("10.0.0.2:4242"));
///   Bytes value = store.get("rank0/address");   // polls the file until rank 0 has set it
///
/// Note [FileStore format]: the file is a sequence of records, each a key and a value, both a
/// little-endian uint32 length followed by that many bytes; for a key written twice the later
/// record wins. set() appends a record; add() reads the newest value of its key and appends the
/// sum as decimal text (so add() is atomic: it holds the exclusive lock from read to append).
/// Writers hold an exclusive flock while they append, readers a shared one, so nobody reads half a
/// record. Each call opens the file anew and reads only the records appended since this store's
/// last call: NFS revalidates its cache on open and lock (close-to-open consistency), which one
/// long-lived descriptor would not get. get() and wait() poll every 10 ms, as PyTorch's do
/// (inotify does not see other machines' writes on NFS). User keys are written under "/" and the
/// store's own under "tandem/", so they cannot collide.
///
/// Note [FileStore lifetime]: a file left by an earlier job holds that job's keys, and a new job
/// meeting on it would read them as its own (PyTorch's FileStore then hangs or mixes jobs). So:
/// - rank 0 creates the file with its first record already in it (written to a temporary file in
///   the same folder and link(2)ed into place: atomic, and it fails on an existing file, on NFS
///   too) and refuses a file that is already there in one line naming it, when and where it was
///   made; it also marks such a file refused, so that ranks which joined it end at once with the
///   same line instead of waiting out the timeout;
/// - the other ranks wait (up to the timeout) for the file to appear, and refuse one that already
///   lists their rank (an earlier job's, or two processes given the same rank) or that a rank has
///   already left (an earlier job's end);
/// - each rank counts itself out when its store is destroyed; the last of world_size removes the
///   file (PyTorch's clean-up count), and so does rank 0 when no other rank joined (a rendezvous
///   that timed out). A job that crashed leaves its file behind, and the next job started on it
///   is refused, saying to remove it;
/// - the file is created 0600 (it holds the job's addresses and NCCL id), a symlink at the path
///   is refused, not followed, and it is read record by record (Note [FileStore records]).

#include <sys/types.h>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "parallel/comm/rendezvous/store.h"

namespace tandem::parallel {

struct FileStoreOptions {
  /// The file: absolute, in a folder that exists (and that every rank sees).
  std::string path;
  /// This process's rank; rank 0 creates the file (Note [FileStore lifetime]).
  int rank = 0;
  /// The ranks that will use the file; the last of them to leave removes it.
  int world_size = 1;
  /// How long a rank other than 0 waits for the file to appear, and the timeout of get() and
  /// wait() calls that take none of their own.
  std::chrono::milliseconds timeout{300000};
};

/// Thread-safe: calls from several threads of one process are serialised.
class FileStore final : public Store {
 public:
  /// Creates (rank 0) or joins (the others) the file; throws a one-line "[store] file://PATH …"
  /// for a missing folder, a stale or foreign file, or a file that does not appear in time.
  explicit FileStore(FileStoreOptions options);
  /// Counts this rank out; the last rank out removes the file. Never throws.
  ~FileStore() override;
  FileStore(const FileStore&) = delete;
  FileStore& operator=(const FileStore&) = delete;

  using Store::get;
  using Store::wait;
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  std::chrono::milliseconds timeout() const override { return options_.timeout; }

  /// "file:///PATH", as error messages name the store.
  std::string address() const;

 private:
  class OpenFile;

  void create();
  void join();
  /// Reads the records appended since the last call into cache_ (Note [FileStore format]);
  /// mutex_ and the file's lock must be held. Throws for a file that is not a store's.
  void read_new_records(OpenFile& file);
  /// read_new_records(), then throws if rank 0 has refused the file (Note [FileStore lifetime]).
  void refresh(OpenFile& file);
  /// Whether a rank other than 0 has joined the file, as read so far; mutex_ must be held.
  bool others_joined() const;
  /// The newest value of `key` (a key as stored) read so far; mutex_ must be held.
  const std::string* find(const std::string& key) const;
  /// Under mutex_ and a shared lock: refreshes and returns the user keys of `keys` not yet set.
  std::vector<std::string> missing(const std::vector<std::string>& keys);
  /// Under mutex_ and an exclusive lock: refreshes and adds delta to the counter at `key` (a key
  /// as stored).
  int64_t add_locked(OpenFile& file, const std::string& key, int64_t delta);
  /// The one line that refuses a file left by an earlier job, naming when and where it was made.
  std::string stale_message(const std::string& why) const;

  FileStoreOptions options_;
  std::mutex mutex_;                          // guards everything below
  std::map<std::string, std::string> cache_;  // the newest value of each key read so far
  off_t read_up_to_ = 0;                      // the file's bytes already in cache_
  ino_t inode_ = 0;                           // the file's, once seen: a replacement is refused
  bool joined_ = false;                       // the destructor counts out only a rank that joined
};

}  // namespace tandem::parallel
