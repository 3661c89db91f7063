// Tandem's Gloo collectives against PyTorch 1.13's on the same inputs: the parent runs
// tests/interop/torch_collectives.py (every case, world sizes 2, 3 and 4, in one Python process),
// then spawns 2, 3 and 4 ranks that run the same cases and compare with PyTorch's bytes.
//
// Bit-equal where both run the same algorithm in the same order (Gloo's own allreduce, reduce,
// and the collectives that only move data, float16 sums included: PyTorch's Gloo float16 also
// rounds once per addition). Within float rounding where they cannot: Avg (PyTorch's Gloo has
// none; it is the sum / size there, × 1/size here) and reduce_scatter (PyTorch 1.13's Gloo has
// none; it is the all-reduce's slice there, Note [Ring reduce-scatter]'s ring order here).
// PyTorch's Gloo has no bfloat16: those cases are in GlooCollectivesMultiprocess.* only.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "engine/tandem.h"
#include "parallel/comm/init_process_group.h"
#include "parallel/comm/process_group.h"
#include "tests/support/spawn_ranks.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_paths.h"

namespace tandem::parallel {
namespace {

using namespace std::chrono_literals;

constexpr const char* kReferenceVariable = "TANDEM_TORCH_COLLECTIVES";

// tests/interop/torch_collectives.py's input_values(): an exact integer over an exact integer,
// one correctly rounded division in double, then float.
enum class Kind { Float, Factor, Int };

Tensor input_values(Kind kind, int rank, int64_t n, int64_t salt) {
  std::vector<float> floats;
  std::vector<int64_t> ints;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = rank * 7919 + i * 104729 + salt * 15485863;
    const int64_t m = k % 1000003;
    if (kind == Kind::Int) {
      ints.push_back(k % 2001 - 1000);
    } else if (kind == Kind::Float) {
      floats.push_back(
          static_cast<float>(static_cast<double>(m * 200 - 100 * 1000003) / 1000003.0));
    } else {
      floats.push_back(static_cast<float>(static_cast<double>(2 * m + 1000003) / 2000006.0));
    }
  }
  if (kind == Kind::Int) return from_vector<int64_t>(ints, {n}, {.dtype = DType::Int64});
  return from_vector<float>(floats, {n});
}

Tensor reduce_input(DType dtype, ReduceOp op, int rank, int64_t n, int64_t salt) {
  if (dtype == DType::Int64) return input_values(Kind::Int, rank, n, salt);
  return input_values(op == ReduceOp::Product ? Kind::Factor : Kind::Float, rank, n, salt)
      .to(dtype);
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor dense = t.contiguous();
  std::vector<uint8_t> bytes(dense.nbytes());
  if (!bytes.empty()) std::memcpy(bytes.data(), dense.data_ptr(), bytes.size());
  return bytes;
}

class Reference {
 public:
  Reference(int rank, int size) : dir_(std::getenv(kReferenceVariable)), rank_(rank), size_(size) {}

  std::vector<uint8_t> bytes(const std::string& name) const {
    const std::string path =
        dir_ + "/" + name + ".n" + std::to_string(size_) + ".r" + std::to_string(rank_) + ".bin";
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in.good()) << "no " << path;
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  // PyTorch's output of `name`, bit for bit.
  void expect_same(const std::string& name, const Tensor& mine) const {
    EXPECT_EQ(bytes_of(mine), bytes(name)) << name << " on rank " << rank_ << " of " << size_;
  }
  // Within float rounding of PyTorch's float32 output: a few ulps of the inputs' scale (±100,
  // summed over up to 4 ranks).
  void expect_close(const std::string& name, const Tensor& mine) const {
    const std::vector<uint8_t> theirs = bytes(name);
    const std::vector<float> values = mine.to_vector<float>();
    ASSERT_EQ(theirs.size(), values.size() * sizeof(float)) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      float reference = 0;
      std::memcpy(&reference, theirs.data() + i * sizeof(float), sizeof(float));
      ASSERT_NEAR(values[i], reference, 1e-4) << name << " element " << i << " on rank " << rank_;
    }
  }

 private:
  std::string dir_;
  int rank_;
  int size_;
};

std::string case_name(const char* what, ReduceOp op, DType dtype) {
  return std::string(what) + "_" + reduce_op_name(op) + "_" + dtype_name(dtype);
}

// The cases of torch_collectives.py's run_cases(), in its order.
void run_cases(ProcessGroup& group, const Reference& torch) {
  const int rank = group.rank(), size = group.size();
  for (const DType dtype : {DType::Float32, DType::Float16, DType::Int64}) {
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max}) {
      Tensor t = reduce_input(dtype, op, rank, 1001, 1);
      group.allreduce({t}, op)->wait();
      torch.expect_same(case_name("allreduce", op, dtype), t);
    }
  }
  for (const auto& [dtype, op] :
       {std::pair{DType::Float32, ReduceOp::Sum}, std::pair{DType::Float16, ReduceOp::Max},
        std::pair{DType::Int64, ReduceOp::Product}}) {
    Tensor t = reduce_input(dtype, op, rank, 1001, 2);
    group.reduce({t}, size - 1, op)->wait();
    if (rank == size - 1) torch.expect_same(case_name("reduce", op, dtype), t);
  }
  Tensor avg = reduce_input(DType::Float32, ReduceOp::Sum, rank, 1001, 3);
  group.allreduce({avg}, ReduceOp::Avg)->wait();
  torch.expect_close("avg_float32", avg);
  Tensor scattered = zeros({13});
  group
      .reduce_scatter_tensor(scattered,
                             reduce_input(DType::Float32, ReduceOp::Sum, rank, 13 * size, 4))
      ->wait();
  torch.expect_close("reduce_scatter_sum_float32", scattered);

  const Tensor mine = input_values(Kind::Float, rank, 13, 5);
  Tensor gathered = zeros({13 * size});
  group.allgather_into_tensor(gathered, mine)->wait();
  torch.expect_same("allgather_float32", gathered);
  std::vector<Tensor> parts;
  if (rank == 0) parts.assign(static_cast<size_t>(size), Tensor());
  for (Tensor& part : parts) part = zeros({13});
  group.gather(parts, mine, 0)->wait();
  if (rank == 0) torch.expect_same("gather_float32", cat(parts));
  Tensor out = zeros({13});
  std::vector<Tensor> inputs;
  const Tensor all = input_values(Kind::Float, rank, 13 * size, 6);
  if (rank == size - 1) {
    for (int r = 0; r < size; ++r) inputs.push_back(all.slice(r * 13, (r + 1) * 13));
  }
  group.scatter(out, inputs, size - 1)->wait();
  torch.expect_same("scatter_float32", out);

  Tensor even = zeros({3 * size});
  group.alltoall_single(even, input_values(Kind::Float, rank, 3 * size, 7))->wait();
  torch.expect_same("alltoall_even_float32", even);
  std::vector<int64_t> in_splits, out_splits;
  for (int s = 0; s < size; ++s) {
    in_splits.push_back((rank + s) % 3 + 1);
    out_splits.push_back((s + rank) % 3 + 1);
  }
  const int64_t in_rows = std::accumulate(in_splits.begin(), in_splits.end(), int64_t{0});
  const int64_t out_rows = std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0});
  Tensor uneven = zeros({out_rows, 2});
  group
      .alltoall_single(uneven, input_values(Kind::Float, rank, 2 * in_rows, 8).view({in_rows, 2}),
                       out_splits, in_splits)
      ->wait();
  torch.expect_same("alltoall_uneven_float32", uneven);
}

TEST(GlooTorchParityMultiprocess, TheSameOutputsAsPyTorchsGloo) {
  if (tandem::testing::launched_as_rank()) {
    auto group = init_process_group("gloo", from_environment(), {.timeout = 30s});
    run_cases(*group, Reference(group->rank(), group->size()));
    return;
  }
  tandem::testing::TempDir dir;
  const char* python = std::getenv("TANDEM_TORCH_PYTHON");
  const std::string command =
      std::string(python != nullptr && *python != '\0' ? python : "/usr/bin/python3") + " " +
      tandem::testing::kTorchCollectivesScript + " " + dir.path().string() + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char line[512];
  while (std::fgets(line, sizeof(line), pipe) != nullptr) output += line;
  const int status = ::pclose(pipe);
  if (output.rfind("skip:", 0) == 0 || (WIFEXITED(status) && WEXITSTATUS(status) == 127)) {
    GTEST_SKIP() << "no PyTorch: " << output;
  }
  ASSERT_EQ(status, 0) << output;
  for (const int size : {2, 3, 4}) {
    EXPECT_TRUE(tandem::testing::ranks_passed(
        tandem::testing::spawn_ranks(size, tandem::testing::current_test_filter(), 60s,
                                     {{kReferenceVariable, dir.path().string()}})))
        << size << " ranks";
  }
}

}  // namespace
}  // namespace tandem::parallel
