#include "engine/threads.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include "engine/error.h"

namespace tandem {
namespace {

int default_from_environment() {
  if (const char* text = std::getenv("TANDEM_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(text, &end, 10);
    TANDEM_CHECK(end != text && *end == '\0' && n >= 1, "[threads] TANDEM_NUM_THREADS='", text,
                 "' is not a positive integer");
    return static_cast<int>(n);
  }
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : static_cast<int>(cores);
}

std::atomic<int>& process_default() {
  static std::atomic<int> value{default_from_environment()};
  return value;
}

// 0 means "no override on this thread".
thread_local int thread_override = 0;

}  // namespace

int num_threads() {
  return thread_override > 0 ? thread_override : process_default().load();
}

void set_num_threads(int n) {
  TANDEM_CHECK(n >= 1, "[threads] thread count must be >= 1, got ", n);
  process_default().store(n);
}

ThreadCountGuard::ThreadCountGuard(int n) : previous_(thread_override) {
  TANDEM_CHECK(n >= 1, "[threads] thread count must be >= 1, got ", n);
  thread_override = n;
}

ThreadCountGuard::~ThreadCountGuard() {
  thread_override = previous_;
}

}  // namespace tandem
