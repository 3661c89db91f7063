// What only FileStore does (Note [FileStore lifetime]): rank 0 creates the file and the others
// wait for it, the last rank out removes it, a stale or foreign file is refused in one line, and
// concurrent adds from several processes are atomic. Its Store interface is tested with the TCP
// store's in store_interface_test.cpp.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "parallel/comm/rendezvous/file_store.h"
#include "parallel/comm/rendezvous/launch_env.h"
#include "tests/support/error_message.h"
#include "tests/support/spawn_ranks.h"
#include "tests/support/temp_dir.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;
using tandem::testing::contains;
using tandem::testing::error_message;
using tandem::testing::TempDir;
namespace fs = std::filesystem;

FileStoreOptions rank_of(const std::string& path, int rank, int world_size,
                         std::chrono::milliseconds timeout = 10s) {
  return {.path = path, .rank = rank, .world_size = world_size, .timeout = timeout};
}

// A job whose rank 0 crashed after creating the file: a child process that makes the store and
// ends without running its destructor, as a killed rank would.
void leave_a_crashed_jobs_file(const std::string& path, int world_size) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      auto* store = new FileStore(rank_of(path, 0, world_size));  // never destroyed: a crash
      store->set("rank0/address", to_bytes("10.0.0.1:4242"));
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bool one_line(const std::string& message) {
  return message.find('\n') == std::string::npos;
}

TEST(FileStore, TheLastRankOutRemovesTheFile) {
  TempDir dir;
  const std::string path = dir.file("store");
  auto first = std::make_unique<FileStore>(rank_of(path, 0, 2));
  auto second = std::make_unique<FileStore>(rank_of(path, 1, 2));
  second->set("k", to_bytes("v"));
  EXPECT_EQ(to_string(first->get("k")), "v");
  EXPECT_EQ(first->address(), "file://" + path);
  first.reset();
  EXPECT_TRUE(fs::exists(path));  // rank 1 still uses it
  second.reset();
  EXPECT_FALSE(fs::exists(path));
}

TEST(FileStore, ARankWaitsForRankZerosFileAndGivesUpNamingIt) {
  TempDir dir;
  const std::string path = dir.file("store");
  std::optional<FileStore> early;
  std::thread joining([&] { early.emplace(rank_of(path, 1, 2)); });
  std::this_thread::sleep_for(100ms);
  FileStore creator(rank_of(path, 0, 2));
  joining.join();
  early->set("from", to_bytes("rank 1"));
  EXPECT_EQ(to_string(creator.get("from")), "rank 1");

  const std::string message =
      error_message([&] { FileStore alone(rank_of(dir.file("never"), 1, 2, 200ms)); });
  EXPECT_TRUE(contains(message, "[store] file://" + dir.file("never") +
                                    " did not appear within 200 ms: rank 0 creates it"))
      << message;
}

TEST(FileStore, AStaleFileIsRefusedInOneLineAndItsRanksEndAtOnce) {
  TempDir dir;
  const std::string path = dir.file("store");
  leave_a_crashed_jobs_file(path, 2);
  // Rank 1 of the new job starts first: its rank is not in the file, so it joins it.
  FileStore early(rank_of(path, 1, 2));
  const std::string message = error_message([&] { FileStore creator(rank_of(path, 0, 2)); });
  EXPECT_TRUE(contains(message, "[store] file://" + path + " already exists (made by rank 0 (pid "))
      << message;
  EXPECT_TRUE(contains(message,
                       ", for 2 ranks): a rendezvous file left by an earlier job that "
                       "did not end cleanly, or one in use by another job; remove it if "
                       "no job uses it (rm " +
                           path + "), or choose another path"))
      << message;
  EXPECT_TRUE(one_line(message)) << message;
  // Rank 1 does not wait out its timeout for a rank 0 that will never come.
  const auto start = std::chrono::steady_clock::now();
  const std::string joined = error_message([&] { early.get("rank0/ready", 60s); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE(contains(
      joined, "[store] file://" + path + " was refused by rank 0, which found it already there"))
      << joined;
  EXPECT_TRUE(fs::exists(path));  // left for the user to look at and remove
}

TEST(FileStore, ARankAlreadyListedIsRefused) {
  TempDir dir;
  const std::string path = dir.file("store");
  FileStore creator(rank_of(path, 0, 3));
  FileStore one(rank_of(path, 1, 3));
  const std::string twice = error_message([&] { FileStore again(rank_of(path, 1, 3)); });
  EXPECT_TRUE(contains(twice, "[store] file://" + path +
                                  " already lists rank 1 (or two processes were given rank 1) "
                                  "(made by rank 0"))
      << twice;
  EXPECT_TRUE(one_line(twice)) << twice;
}

TEST(FileStore, AFileThatRanksHaveLeftIsRefused) {
  TempDir dir;
  const std::string path = dir.file("store");
  FileStore creator(rank_of(path, 0, 3));
  { FileStore one(rank_of(path, 1, 3)); }
  const std::string message = error_message([&] { FileStore two(rank_of(path, 2, 3)); });
  EXPECT_TRUE(contains(message, "[store] file://" + path +
                                    " has already been left by 1 of its "
                                    "ranks (made by rank 0"))
      << message;
}

TEST(FileStore, AForeignFileIsRefusedAndLeftUntouched) {
  TempDir dir;
  const std::string path = dir.file("notes.txt");
  std::ofstream(path) << "my notes\n";
  for (int rank : {0, 1}) {
    const std::string message = error_message([&] { FileStore store(rank_of(path, rank, 2)); });
    EXPECT_TRUE(contains(message, "[store] file://" + path +
                                      " is not a Tandem rendezvous file; name a file that does "
                                      "not exist (rank 0 creates it)"))
        << message;
  }
  EXPECT_EQ(read_file(path), "my notes\n");
  const std::string empty = dir.file("empty");
  { std::ofstream created(empty); }
  const std::string message = error_message([&] { FileStore store(rank_of(empty, 0, 2)); });
  EXPECT_TRUE(contains(message, " is empty, not a Tandem rendezvous file")) << message;
  EXPECT_EQ(read_file(empty), "");
}

TEST(FileStore, AMissingFolderOrAFolderIsAOneLineError) {
  TempDir dir;
  const std::string missing = dir.file("no/such/folder") + "/store";
  for (int rank : {0, 1}) {
    const std::string message = error_message([&] { FileStore store(rank_of(missing, rank, 2)); });
    EXPECT_TRUE(contains(message, "[store] file://" + missing + ": the folder " +
                                      dir.file("no/such/folder") + " does not exist"))
        << message;
    EXPECT_TRUE(one_line(message)) << message;
  }
  const std::string folder = error_message([&] { FileStore store(rank_of(dir.path(), 0, 2)); });
  EXPECT_TRUE(contains(folder, " is a folder; name a file in it")) << folder;
}

TEST(FileStore, AFileRemovedWhileInUseIsNamed) {
  TempDir dir;
  const std::string path = dir.file("store");
  FileStore store(rank_of(path, 0, 2));
  fs::remove(path);
  const std::string message = error_message([&] { store.set("k", {}); });
  EXPECT_TRUE(contains(message, "[store] file://" + path + " was removed while the job used it"))
      << message;
}

// The peak resident size of this process so far, in MB.
long peak_mb() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

// Review S7: a symlink at the path is refused without reading its target, and a large foreign
// file is refused after its first bytes (it used to be read whole: 512 MiB, 537 MB resident).
TEST(FileStore, ASymlinkOrALargeForeignFileIsRefusedWithoutReadingIt) {
  TempDir dir;
  const std::string big = dir.file("big.sparse"), link = dir.file("store.link");
  { std::ofstream(big) << "x"; }
  fs::resize_file(big, 512u << 20);  // sparse: no disk
  fs::create_symlink(big, link);
  const long before = peak_mb();
  for (int rank : {0, 1}) {
    const std::string message = error_message([&] { FileStore store(rank_of(link, rank, 2)); });
    EXPECT_TRUE(
        contains(message, "[store] file://" + link + " is a symbolic link; name the file itself"))
        << message;
    const std::string foreign = error_message([&] { FileStore store(rank_of(big, rank, 2)); });
    EXPECT_TRUE(contains(foreign, " is not a Tandem rendezvous file")) << foreign;
  }
  EXPECT_LT(peak_mb() - before, 64);
  EXPECT_EQ(fs::file_size(big), 512u << 20);
}

// Review S7: the file holds the job's addresses and NCCL id: its user's only. A rendezvous that
// no other rank joined removes it when rank 0 leaves, so the next run is not refused.
TEST(FileStore, TheFileIsPrivateAndGoesWithARankZeroThatNobodyJoined) {
  TempDir dir;
  const std::string path = dir.file("store");
  {
    FileStore alone(rank_of(path, 0, 2));
    EXPECT_EQ(fs::status(path).permissions(), fs::perms::owner_read | fs::perms::owner_write);
  }  // as after a rendezvous that timed out waiting for rank 1
  EXPECT_FALSE(fs::exists(path));
  FileStore again(rank_of(path, 0, 2));  // not refused as a crashed job's
  FileStore one(rank_of(path, 1, 2));
}

// Review S9: a counter past INT64_MAX is an error, not undefined behaviour.
TEST(FileStore, ACounterThatWouldOverflowIsRefused) {
  TempDir dir;
  FileStore store(rank_of(dir.file("store"), 0, 1));
  EXPECT_EQ(store.add("n", INT64_MAX), INT64_MAX);
  const std::string message = error_message([&] { store.add("n", 1); });
  EXPECT_TRUE(contains(message,
                       "[store] add('n') failed: 9223372036854775807 + 1 does not fit in "
                       "64 bits"))
      << message;
  EXPECT_EQ(store.add("n", -1), INT64_MAX - 1);
}

// Real processes, each with its own store on one file, adding to one counter at once: every add
// sees a distinct value, and the last process out removes the file.
TEST(FileStoreMultiprocess, ConcurrentAddsFromSeveralProcessesAreAtomic) {
  constexpr int kRanks = 4, kAdds = 50;
  if (!testing::launched_as_rank()) {
    TempDir dir;
    const std::string path = dir.file("store");
    EXPECT_TRUE(testing::ranks_passed(
        testing::spawn_ranks(kRanks, testing::current_test_filter(),
                             {.timeout = 60s, .env = {{"TANDEM_TEST_FILE_STORE", path}}})));
    EXPECT_FALSE(fs::exists(path)) << "the last rank out did not remove the file";
    return;
  }
  const DistributedEnv env = from_environment();
  const char* path = std::getenv("TANDEM_TEST_FILE_STORE");
  ASSERT_NE(path, nullptr);
  FileStore store(rank_of(path, env.rank, kRanks, 30s));
  std::ostringstream mine;
  for (int i = 0; i < kAdds; ++i) mine << store.add("counter", 1) << " ";
  store.set("returned/" + std::to_string(env.rank), to_bytes(mine.str()));
  std::vector<int64_t> all;
  for (int rank = 0; rank < kRanks; ++rank) {
    std::istringstream values(to_string(store.get("returned/" + std::to_string(rank))));
    for (int64_t value = 0; values >> value;) all.push_back(value);
  }
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(kRanks * kAdds);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(all, expected);
}

}  // namespace
}  // namespace tandem::parallel
