// The bodies of memory.cu (fill, cast, copy_strided) on a CPU grid, against the CPU backend.

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/kernels/memory.h"
#include "engine/tandem.h"
#include "engine/tensor_impl.h"
#include "tests/engine/cuda/kernels/body_checks.h"
#include "tests/support/cpu_grid.h"

namespace tandem::testing {
namespace {

namespace k = cuda::kernels;

template <typename T>
void check_fill(T pattern) {
  for (const int64_t n : {0, 1, 300, 5000}) {
    for (const CpuGrid& grid : grids_for(n)) {
      std::vector<T> buffer(static_cast<size_t>(n) + 2, T{0});  // buffer[n], buffer[n+1]: guard
      run_grid_stride(k::FillBody<T>{buffer.data(), pattern, n}, grid);
      for (int64_t i = 0; i < n + 2; ++i) {
        ASSERT_EQ(buffer[i], i < n ? pattern : T{0}) << sizeof(T) << " bytes, n " << n << ", " << i;
      }
    }
  }
}

TEST(FillBodies, WriteThePatternToExactlyNElementsOfEverySize) {
  check_fill<uint8_t>(0xa5);
  check_fill<uint16_t>(0xbeef);
  check_fill<uint32_t>(0xdeadbeefu);
  check_fill<uint64_t>(0x0123456789abcdefull);
}

// Values every dtype holds (uint8 included): integers, halves and quarters, and fractions that
// bfloat16 and float16 round.
Tensor cast_source(DType dtype, int64_t n) {
  std::mt19937_64 random(7);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = static_cast<float>(random_int(random, 0, 250 * 64)) / 64.0f;
  Tensor source = from_vector(values, {n});
  Tensor typed = empty({n}, {.dtype = dtype});
  cpu().cast(source, typed);
  return typed;
}

template <DType kFrom, DType kTo>
void check_cast() {
  using From = typename CppType<kFrom>::type;
  using To = typename CppType<kTo>::type;
  const int64_t n = 777;
  const Tensor in = cast_source(kFrom, n);
  Tensor expected = empty({n}, {.dtype = kTo});
  cpu().cast(in, expected);
  for (const CpuGrid& grid : grids_for(n)) {
    Tensor actual = full({n}, 0.0, {.dtype = kTo});
    run_grid_stride(k::CastBody<From, To>{in.data<From>(), actual.data<To>(), n}, grid);
    const std::string what = std::string(dtype_name(kFrom)) + " -> " + dtype_name(kTo);
    ASSERT_EQ(std::memcmp(actual.data_ptr(), expected.data_ptr(), expected.nbytes()), 0) << what;
  }
}

template <DType kFrom>
void check_casts_from() {
  check_cast<kFrom, DType::Float32>();
  check_cast<kFrom, DType::Int64>();
  check_cast<kFrom, DType::UInt8>();
  check_cast<kFrom, DType::BFloat16>();
  check_cast<kFrom, DType::Float16>();
}

TEST(CastBodies, MatchTheCpuBackendBitForBitForEveryPairOfTypes) {
  check_casts_from<DType::Float32>();
  check_casts_from<DType::Int64>();
  check_casts_from<DType::UInt8>();
  check_casts_from<DType::BFloat16>();
  check_casts_from<DType::Float16>();
}

// A random view of a random buffer: 1 to 5 dims, some reversed in memory order, some with
// gaps, some of size 1, a nonzero offset.
struct RandomView {
  Shape shape, strides;
  int64_t offset = 0;
  int64_t storage_elements = 0;
};
RandomView random_view(std::mt19937_64& random) {
  RandomView view;
  const int64_t rank = random_int(random, 1, 5);
  view.shape.resize(static_cast<size_t>(rank));
  for (int64_t& size : view.shape) size = random_int(random, 1, 6);
  std::vector<int64_t> order(static_cast<size_t>(rank));  // memory order, innermost last
  for (int64_t d = 0; d < rank; ++d) order[d] = d;
  std::shuffle(order.begin(), order.end(), random);
  view.strides.assign(static_cast<size_t>(rank), 0);
  int64_t stride = random_int(random, 1, 2);
  for (int64_t i = rank - 1; i >= 0; --i) {
    const auto d = static_cast<size_t>(order[i]);
    view.strides[d] = stride;
    stride *= view.shape[d] + random_int(random, 0, 1);  // sometimes a gap
  }
  view.offset = random_int(random, 0, 5);
  view.storage_elements = view.offset + stride;
  return view;
}

k::StridedLayout layout_of(const RandomView& view) {
  k::StridedLayout layout;
  layout.rank = static_cast<int>(view.shape.size());
  for (int d = 0; d < layout.rank; ++d) {
    layout.size[d] = view.shape[d];
    layout.stride[d] = view.strides[d];
  }
  return layout;
}

TEST(CopyStridedBodies, MatchTheCpuBackendOnRandomViews) {
  std::mt19937_64 random(11);
  for (int round = 0; round < 200; ++round) {
    const RandomView view = random_view(random);
    const Tensor base = random_tensor({view.storage_elements}, round);
    const Tensor src(std::make_shared<TensorImpl>(base.storage(), view.shape, view.strides,
                                                  view.offset, DType::Float32));
    Tensor expected = empty(view.shape);
    cpu().copy(src, expected);
    const int64_t n = src.numel();
    for (const CpuGrid& grid : grids_for(n)) {
      Tensor actual = full(view.shape, -1.0);
      // The 4-byte instance, as copy_strided() picks it for float32.
      run_grid_stride(k::CopyStridedBody<uint32_t>{static_cast<const uint32_t*>(src.data_ptr()),
                                                   layout_of(view),
                                                   static_cast<uint32_t*>(actual.data_ptr()), n},
                      grid);
      expect_all_equal(actual.to_vector<float>(), expected.to_vector<float>(),
                       "round " + std::to_string(round));
    }
  }
}

}  // namespace
}  // namespace tandem::testing
