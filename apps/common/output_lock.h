#pragma once
/// OutputLock: one run at a time writes an output file.
///
/// Note [One writer per output]: two runs started with the same --save (or --log-json) would each
/// print "written:" while one's work silently replaced the other's. So a run holds an flock on
/// `PATH.lock`, beside the output, for its whole lifetime, and a second run stops in one line
/// before it trains, naming the holder (host and pid). flock, not a lock on the output itself:
/// the output is replaced by rename at every save, and a lock belongs to a file, not a name. The
/// kernel drops the lock when the holder dies, so a crashed run never leaves a stale one; a clean
/// exit also removes the file. Where the file system has no locks, the run goes on unlocked.

#include <string>

namespace tandem::apps {

class OutputLock {
 public:
  /// Locks `path` for this process, or throws "[program] --flag PATH is being written by another
  /// run (host H, pid N; PATH.lock): wait for it to end, or choose another path".
  OutputLock(const std::string& program, const std::string& flag, const std::string& path);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  /// The lock file: the output's path with ".lock" appended.
  static std::string lock_path(const std::string& path);

 private:
  std::string lock_path_;
  int fd_ = -1;  ///< the locked file, or -1 where the file system has no locks
};

}  // namespace tandem::apps
