#pragma once
/// How many CPU threads a kernel may use. There is a process-wide default
/// (TANDEM_NUM_THREADS, else all cores) and a per-calling-thread override, so
/// that DataParallel replicas on cpu:0 and cpu:1 each get their own share of
/// cores instead of fighting over all of them.

namespace tandem {

/// Threads available to kernels called from this thread.
int num_threads();

/// Sets the process-wide default (n >= 1).
void set_num_threads(int n);

/// Overrides the thread count for kernels called from this thread, for its lifetime.
class ThreadCountGuard {
 public:
  explicit ThreadCountGuard(int n);
  ~ThreadCountGuard();
  ThreadCountGuard(const ThreadCountGuard&) = delete;
  ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;

 private:
  int previous_;
};

}  // namespace tandem
