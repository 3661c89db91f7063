#pragma once
/// Device memory comes from an Allocator. The CPU one hands out 64-byte aligned
/// blocks (AVX-512 and oneDNN friendly); the CUDA backend implements the same
/// interface with a stream-aware caching allocator.

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tandem {

struct AllocatorStats {
  int64_t allocated_bytes = 0;  ///< bytes currently handed out to tensors
  int64_t reserved_bytes = 0;   ///< bytes held from the system (>= allocated with caching)
  int64_t peak_allocated_bytes = 0;
  int64_t allocation_count = 0;  ///< allocate() calls so far
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// Returns a block of at least nbytes (nbytes may be 0). Throws tandem::Error when out of memory.
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) noexcept = 0;
  virtual AllocatorStats stats() const = 0;
};

/// The process-wide host allocator: 64-byte aligned, thread-safe, counts bytes.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  void* allocate(size_t nbytes) override;
  void deallocate(void* ptr, size_t nbytes) noexcept override;
  AllocatorStats stats() const override;

 private:
  std::atomic<int64_t> allocated_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> count_{0};
};

CpuAllocator& cpu_allocator();

}  // namespace tandem
