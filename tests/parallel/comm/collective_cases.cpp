#include "tests/parallel/comm/collective_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "engine/tandem.h"
#include "tests/support/error_message.h"

namespace tandem::parallel::testing {
namespace {

using tandem::testing::contains;
using tandem::testing::error_message;

constexpr ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product, ReduceOp::Min,
                             ReduceOp::Max};
constexpr DType kDtypes[] = {DType::Float32, DType::BFloat16, DType::Float16, DType::Int64};

// Rank r's element i for `op`: quarters in [-5, 5] for sums, whose partial sums over up to 4
// ranks are exact even in bfloat16; ±0.5, ±1, ±2 for products (exact too); integers for int64.
double input_value(ReduceOp op, DType dtype, int rank, int64_t i) {
  const int64_t k = i * 7 + rank * 3;
  if (op == ReduceOp::Product) {
    static constexpr double kFactors[] = {0.5, -1, 2, 1, -2, -0.5};
    const double factor = kFactors[k % 6];
    return dtype == DType::Int64 ? static_cast<double>(static_cast<int64_t>(factor * 2)) : factor;
  }
  if (dtype == DType::Int64) return static_cast<double>(k % 201 - 100);
  return static_cast<double>(k % 41 - 20) * 0.25;
}

Tensor make(const std::vector<double>& values, DType dtype) {
  const auto n = static_cast<int64_t>(values.size());
  if (dtype == DType::Int64) {
    std::vector<int64_t> ints(values.begin(), values.end());
    return from_vector<int64_t>(ints, {n}, {.dtype = DType::Int64});
  }
  std::vector<float> floats(values.begin(), values.end());
  return from_vector<float>(floats, {n}).to(dtype);
}

std::vector<double> inputs(ReduceOp op, DType dtype, int rank, int64_t n, int64_t first = 0) {
  std::vector<double> values;
  for (int64_t i = first; i < first + n; ++i) values.push_back(input_value(op, dtype, rank, i));
  return values;
}

// The reduction over `size` ranks of elements [first, first + n), exact in double (Avg: the
// sum, × 1/size in float as the groups define it).
Tensor expected(ReduceOp op, DType dtype, int size, int64_t n, int64_t first = 0) {
  std::vector<double> result = inputs(op, dtype, 0, n, first);
  for (int r = 1; r < size; ++r) {
    const std::vector<double> other = inputs(op, dtype, r, n, first);
    for (size_t i = 0; i < result.size(); ++i) {
      const double x = result[i], y = other[i];
      result[i] = op == ReduceOp::Product ? x * y
                  : op == ReduceOp::Min   ? std::min(x, y)
                  : op == ReduceOp::Max   ? std::max(x, y)
                                          : x + y;
    }
  }
  if (op == ReduceOp::Avg) {
    for (double& v : result) v = static_cast<float>(v) * (1.0f / static_cast<float>(size));
  }
  return make(result, dtype);
}

// Values as doubles, whatever the dtype, for EXPECT_EQ with a readable failure.
std::vector<double> values_of(const Tensor& t) {
  if (t.dtype() == DType::Int64) {
    const std::vector<int64_t> ints = t.to_vector<int64_t>();
    return {ints.begin(), ints.end()};
  }
  const std::vector<float> floats = t.to(DType::Float32).to_vector<float>();
  return {floats.begin(), floats.end()};
}

std::string label(ReduceOp op, DType dtype, int64_t n) {
  return std::string(reduce_op_name(op)) + " " + dtype_name(dtype) + " n=" + std::to_string(n);
}

// --- the collectives

// 1 MiB of float32, past the 64 KiB from which Open MPI's MPI_Ireduce on 2 ranks pipelines the
// data in 8 KiB segments, one per test of the request (Note [MPI polling]). Compared whole, so
// that a failure does not print a quarter of a million elements.
void check_long_reduce(ProcessGroup& group) {
  constexpr int64_t n = 1 << 18;
  const int rank = group.rank(), root = group.size() - 1;
  const DType f32 = DType::Float32;
  Tensor mine = make(inputs(ReduceOp::Sum, f32, rank, n), f32);
  group.reduce({mine}, root, ReduceOp::Sum)->wait();
  const Tensor want = rank == root ? expected(ReduceOp::Sum, f32, group.size(), n)
                                   : make(inputs(ReduceOp::Sum, f32, rank, n), f32);
  EXPECT_TRUE(values_of(mine) == values_of(want))
      << "reduce to " << root << " " << label(ReduceOp::Sum, f32, n) << " differs";
}

void check_allreduce_and_reduce(ProcessGroup& group) {
  const int rank = group.rank(), size = group.size();
  for (const DType dtype : kDtypes) {
    for (const ReduceOp op : kOps) {
      if (!reduce_op_supports(op, dtype)) continue;
      // An odd length, one element and none, in one call; each reduced on its own.
      std::vector<Tensor> tensors = {make(inputs(op, dtype, rank, 1001), dtype),
                                     make(inputs(op, dtype, rank, 1, 5), dtype), make({}, dtype)};
      group.allreduce(tensors, op)->wait();
      EXPECT_EQ(values_of(tensors[0]), values_of(expected(op, dtype, size, 1001)))
          << "allreduce " << label(op, dtype, 1001);
      EXPECT_EQ(values_of(tensors[1]), values_of(expected(op, dtype, size, 1, 5)))
          << "allreduce " << label(op, dtype, 1);
      const int root = (static_cast<int>(op) + 1) % size;
      Tensor mine = make(inputs(op, dtype, rank, 37), dtype);
      group.reduce({mine}, root, op)->wait();
      const Tensor want =
          rank == root ? expected(op, dtype, size, 37) : make(inputs(op, dtype, rank, 37), dtype);
      EXPECT_EQ(values_of(mine), values_of(want))
          << "reduce to " << root << " " << label(op, dtype, 37);
    }
  }
  check_long_reduce(group);
}

void check_reduce_scatter(ProcessGroup& group) {
  const int rank = group.rank(), size = group.size();
  for (const DType dtype : kDtypes) {
    for (const ReduceOp op : kOps) {
      if (!reduce_op_supports(op, dtype)) continue;
      for (const int64_t n : {int64_t{13}, int64_t{1}, int64_t{0}}) {
        const std::vector<double> all = inputs(op, dtype, rank, n * size);
        const Tensor input = make(all, dtype);
        Tensor flat_out = make(std::vector<double>(static_cast<size_t>(n), 0.0), dtype);
        auto flat = group.reduce_scatter_tensor(flat_out, input, op);
        std::vector<Tensor> parts;
        for (int r = 0; r < size; ++r) parts.push_back(input.slice(r * n, (r + 1) * n).clone());
        Tensor list_out = make(std::vector<double>(static_cast<size_t>(n), 0.0), dtype);
        group.reduce_scatter(list_out, parts, op)->wait();
        flat->wait();
        const Tensor want = expected(op, dtype, size, n, rank * n);
        EXPECT_EQ(values_of(flat_out), values_of(want))
            << "reduce_scatter_tensor " << label(op, dtype, n);
        EXPECT_EQ(values_of(list_out), values_of(want)) << "reduce_scatter " << label(op, dtype, n);
        EXPECT_EQ(values_of(input), values_of(make(all, dtype))) << "the input changed";
      }
    }
  }
}

void check_gathers(ProcessGroup& group) {
  const int rank = group.rank(), size = group.size();
  for (const DType dtype : kDtypes) {
    for (const int64_t n : {int64_t{7}, int64_t{0}}) {
      const auto mine = [&](int r) { return make(inputs(ReduceOp::Sum, dtype, r, n, 100), dtype); };
      std::vector<Tensor> list;
      for (int r = 0; r < size; ++r) list.push_back(make(std::vector<double>(n, 0.0), dtype));
      group.allgather(list, mine(rank))->wait();
      Tensor flat = make(std::vector<double>(static_cast<size_t>(n * size), 0.0), dtype);
      group.allgather_into_tensor(flat, mine(rank))->wait();
      // In place, as sharded data parallel gathers its parameters (is_own_chunk()).
      Tensor in_place = make(std::vector<double>(static_cast<size_t>(n * size), 0.0), dtype);
      in_place.slice(rank * n, (rank + 1) * n).copy_(mine(rank));
      group.allgather_into_tensor(in_place, in_place.slice(rank * n, (rank + 1) * n))->wait();
      for (int r = 0; r < size; ++r) {
        EXPECT_EQ(values_of(list[r]), values_of(mine(r))) << "allgather " << dtype_name(dtype);
        EXPECT_EQ(values_of(flat.slice(r * n, (r + 1) * n)), values_of(mine(r)))
            << "allgather_into_tensor " << dtype_name(dtype);
        EXPECT_EQ(values_of(in_place.slice(r * n, (r + 1) * n)), values_of(mine(r)))
            << "allgather_into_tensor in place " << dtype_name(dtype);
      }
      for (int root = 0; root < size; ++root) {
        std::vector<Tensor> gathered;
        if (rank == root) {
          for (int r = 0; r < size; ++r)
            gathered.push_back(make(std::vector<double>(n, 0.0), dtype));
        }
        group.gather(gathered, mine(rank), root)->wait();
        for (int r = 0; r < static_cast<int>(gathered.size()); ++r) {
          EXPECT_EQ(values_of(gathered[r]), values_of(mine(r))) << "gather to " << root;
        }
        std::vector<Tensor> scattered;
        if (rank == root) {
          for (int r = 0; r < size; ++r) scattered.push_back(mine(r + root * 10));
        }
        Tensor out = make(std::vector<double>(static_cast<size_t>(n), 0.0), dtype);
        group.scatter(out, scattered, root)->wait();
        EXPECT_EQ(values_of(out), values_of(mine(rank + root * 10))) << "scatter from " << root;
      }
    }
  }
}

// Rank r sends (r + s) % 3 rows of 2 elements to rank s (some parts empty), each row naming its
// sender, receiver and index.
void check_alltoall(ProcessGroup& group) {
  const int rank = group.rank(), size = group.size();
  const auto rows = [](int from, int to) { return static_cast<int64_t>((from + to) % 3); };
  const auto part = [&](int from, int to) {
    std::vector<double> values;
    for (int64_t k = 0; k < rows(from, to) * 2; ++k)
      values.push_back(from * 16 + to * 4 + k);  // exact in bfloat16
    return values;
  };
  for (const DType dtype : kDtypes) {
    std::vector<double> in_values, want_values;
    std::vector<int64_t> in_splits, out_splits;
    std::vector<Tensor> inputs_list, outputs_list;
    for (int s = 0; s < size; ++s) {
      const std::vector<double> out_part = part(s, rank), in_part = part(rank, s);
      in_values.insert(in_values.end(), in_part.begin(), in_part.end());
      want_values.insert(want_values.end(), out_part.begin(), out_part.end());
      in_splits.push_back(rows(rank, s));
      out_splits.push_back(rows(s, rank));
      inputs_list.push_back(make(in_part, dtype).view({rows(rank, s), 2}));
      outputs_list.push_back(make(std::vector<double>(out_part.size(), -1.0), dtype));
    }
    const auto total_rows = static_cast<int64_t>(want_values.size() / 2);
    Tensor output =
        make(std::vector<double>(want_values.size(), -1.0), dtype).view({total_rows, 2});
    const Tensor input =
        make(in_values, dtype).view({static_cast<int64_t>(in_values.size() / 2), 2});
    group.alltoall_single(output, input, out_splits, in_splits)->wait();
    EXPECT_EQ(values_of(output.reshape({-1})), want_values)
        << "uneven alltoall_single " << dtype_name(dtype);
    group.alltoall(outputs_list, inputs_list)->wait();
    for (int s = 0; s < size; ++s) {
      EXPECT_EQ(values_of(outputs_list[s]), part(s, rank)) << "alltoall from " << s;
    }
    // Even: 3 elements to each rank.
    std::vector<double> even_in, even_want;
    for (int s = 0; s < size; ++s) {
      for (int k = 0; k < 3; ++k) {
        even_in.push_back(rank * 16 + s * 4 + k);
        even_want.push_back(s * 16 + rank * 4 + k);
      }
    }
    Tensor even_out = make(std::vector<double>(even_in.size(), 0.0), dtype);
    group.alltoall_single(even_out, make(even_in, dtype))->wait();
    EXPECT_EQ(values_of(even_out), even_want) << "even alltoall_single " << dtype_name(dtype);
  }
}

// --- NaN in min and max (Note [NaN in min and max] in host_reduce.h)

// The first element of `got` that differs from `want`, NaN matching NaN; "" when none does.
// One line, not thousands of elements, when it fails.
std::string first_difference(const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> values = values_of(got);
  for (size_t i = 0; i < want.size(); ++i) {
    const bool both_nan = std::isnan(values[i]) && std::isnan(want[i]);
    if (!both_nan && values[i] != want[i]) {
      return "element " + std::to_string(i) + " is " + std::to_string(values[i]) + ", expected " +
             std::to_string(want[i]);
    }
  }
  return "";
}

// One NaN on one rank, in the middle of a buffer past Open MPI's switch from recursive doubling
// to the ring (10 KiB), comes out of min and max on every rank, whichever rank held it; the
// other elements are as without it.
void check_nan_in_min_and_max(ProcessGroup& group) {
  const int rank = group.rank(), size = group.size();
  constexpr int64_t n = 4099, mid = n / 2;
  for (const DType dtype : {DType::Float32, DType::BFloat16, DType::Float16}) {
    for (const ReduceOp op : {ReduceOp::Min, ReduceOp::Max}) {
      for (int holder = 0; holder < size; ++holder) {
        // `parts` buffers of n, one after another, each with its NaN on the holder.
        const auto input = [&](int64_t parts) {
          std::vector<double> values = inputs(op, dtype, rank, n * parts);
          for (int64_t p = 0; rank == holder && p < parts; ++p) values[p * n + mid] = NAN;
          return make(values, dtype);
        };
        const auto want = [&](int64_t first) {
          std::vector<double> values = values_of(expected(op, dtype, size, n, first));
          values[mid] = NAN;
          return values;
        };
        const std::string what = label(op, dtype, n) + ", NaN on rank " + std::to_string(holder);
        Tensor all = input(1);
        group.allreduce({all}, op)->wait();
        EXPECT_EQ(first_difference(all, want(0)), "") << "allreduce " << what;
        const int root = (holder + static_cast<int>(op)) % size;
        Tensor reduced = input(1);
        group.reduce({reduced}, root, op)->wait();
        if (rank == root) {
          EXPECT_EQ(first_difference(reduced, want(0)), "") << "reduce to " << root << " " << what;
        }
        Tensor chunk = make(std::vector<double>(static_cast<size_t>(n), 0.0), dtype);
        group.reduce_scatter_tensor(chunk, input(size), op)->wait();
        EXPECT_EQ(first_difference(chunk, want(rank * n)), "") << "reduce_scatter " << what;
      }
    }
  }
}

}  // namespace

void check_every_collective(ProcessGroup& group) {
  check_allreduce_and_reduce(group);
  check_reduce_scatter(group);
  check_gathers(group);
  check_alltoall(group);
  check_nan_in_min_and_max(group);
  group.barrier()->wait();
}

void check_consistency_refusals(ProcessGroup& group) {
  const int rank = group.rank();
  Tensor t = full({rank == 1 ? 7 : 8}, 1.0);
  const std::string sizes = error_message([&] { group.allreduce({t}, ReduceOp::Sum)->wait(); });
  // Appends only: GCC 12 warns falsely (-Wrestrict) about "[" + std::string.
  std::string expected = "[";
  expected += group.backend_name();
  expected += "] allreduce on rank " + std::to_string(rank) +
              " of 3: the ranks were not asked for the same collective, so none ran it: ranks 0 "
              "and 2: allreduce sum: 8 float32; rank 1: allreduce sum: 7 float32";
  EXPECT_TRUE(contains(sizes, expected)) << sizes;
  EXPECT_EQ(t.data<float>()[0], 1.0f) << "nothing ran";
  const std::string calls = error_message([&] {
    Tensor u = full({4}, 1.0);
    (rank == 2 ? group.broadcast({u}, 0) : group.allreduce({u}, ReduceOp::Max))->wait();
  });
  EXPECT_TRUE(contains(calls,
                       "ranks 0 and 1: allreduce max: 4 float32; rank 2: broadcast at "
                       "root 0: 4 float32"))
      << calls;
  // Uneven alltoall sizes that do not pair up: rank 0 sends rank 1 two rows, rank 1 expects one.
  const std::vector<int64_t> in_splits = {1, rank == 0 ? 2 : 1, 1};
  Tensor out = zeros({3}), in = zeros({in_splits[0] + in_splits[1] + in_splits[2]});
  const std::string counts = error_message([&] {
    group.alltoall_single(out, in, {1, 1, 1}, in_splits)->wait();
  });
  EXPECT_TRUE(contains(counts, "rank 0 sends 2 elements to rank 1, which expects 1 from it"))
      << counts;
  // Every other collective with one rank's size off by one (n = 5 elsewhere, 6 on rank 1), or
  // its root or dtype different.
  const int64_t n = rank == 1 ? 6 : 5;
  const std::vector<std::pair<std::string, std::function<std::shared_ptr<Work>()>>> wrong = {
      {"allgather_into_tensor",
       [&] { return group.allgather_into_tensor(zeros({3 * n}), zeros({n})); }},
      {"reduce_scatter_tensor",
       [&] { return group.reduce_scatter_tensor(zeros({n}), zeros({3 * n})); }},
      {"reduce", [&] { return group.reduce({zeros({n})}, 0, ReduceOp::Min); }},
      {"broadcast", [&] { return group.broadcast({zeros({5})}, rank == 2 ? 1 : 0); }},
      {"gather",
       [&] {
         std::vector<Tensor> outs;
         for (int r = 0; rank == 0 && r < 3; ++r) outs.push_back(zeros({n}));
         return group.gather(outs, zeros({n}), 0);
       }},
      {"scatter",
       [&] {
         std::vector<Tensor> ins;
         for (int r = 0; rank == 2 && r < 3; ++r) ins.push_back(zeros({n}));
         return group.scatter(zeros({n}), ins, 2);
       }},
      {"allreduce",
       [&] {
         return group.allreduce({zeros({5}, {.dtype = rank == 0 ? DType::Int64 : DType::Float32})});
       }},
  };
  for (const auto& [name, call] : wrong) {
    const std::string message = error_message([&] { call()->wait(); });
    std::string refused = "[";
    refused += group.backend_name();
    refused += "] " + name + " on rank " + std::to_string(rank) +
               " of 3: the ranks were not asked for the same collective";
    EXPECT_TRUE(contains(message, refused)) << message;
  }
  Tensor fine = full({5}, rank);
  group.allreduce({fine}, ReduceOp::Sum)->wait();
  EXPECT_EQ(fine.data<float>()[4], 3.0f);
}

void check_subgroups(ProcessGroup& world) {
  const int rank = world.rank();
  auto odd = new_group(world, {3, 1});
  auto low = world.new_group({0, 1, 2});
  if (rank % 2 == 1) {
    EXPECT_EQ(odd->rank(), rank / 2);
    EXPECT_EQ(odd->size(), 2);
  } else {
    EXPECT_EQ(odd->rank(), -1);
    EXPECT_FALSE(odd->is_member());
    const std::string message = error_message([&] { odd->allreduce({zeros({1})}); });
    std::string expected = "[";
    expected += world.backend_name();
    expected +=
        "] allreduce: this rank is not a member of this group (ranks 1 and 3 of the group it was "
        "made from); new_group() gives the ranks outside a group that refuses every operation";
    EXPECT_TRUE(contains(message, expected)) << message;
    EXPECT_TRUE(contains(error_message([&] { odd->new_group({0}); }), "not a member"));
  }
  for (int round = 0; round < 3; ++round) {
    Tensor in_world = full({100}, rank + round);
    Tensor in_odd = full({100}, rank * 10 + round);
    Tensor in_low = full({3}, rank);
    auto world_work = world.allreduce({in_world});
    auto odd_work = odd->is_member() ? odd->allreduce({in_odd}) : nullptr;
    auto low_work = low->is_member() ? low->allreduce({in_low}, ReduceOp::Max) : nullptr;
    world_work->wait();
    EXPECT_EQ(in_world.data<float>()[99], 6 + 4 * round);
    if (odd_work) {
      odd_work->wait();
      EXPECT_EQ(in_odd.data<float>()[0], 40 + 2 * round);
    }
    if (low_work) {
      low_work->wait();
      EXPECT_EQ(in_low.data<float>()[0], 2);
    }
  }
  // A sub-group of a sub-group, made by its members only.
  if (low->is_member()) {
    auto pair = low->new_group({1, 2});
    EXPECT_EQ(pair->rank(), rank == 0 ? -1 : rank - 1);
    if (pair->is_member()) {
      Tensor t = full({2}, rank);
      pair->broadcast({t}, 1)->wait();
      EXPECT_EQ(t.data<float>()[1], 2.0f);
    }
  }
  world.barrier()->wait();
}

void check_tags_and_any_source(ProcessGroup& group) {
  const int rank = group.rank(), size = group.size();
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  // Two messages to the right, received in the other order by their tags; odd length and none.
  Tensor first = full({1001}, rank), second = full({3}, rank * 10, {.dtype = DType::Int64});
  Tensor none = zeros({0});
  auto sends = std::vector{group.isend(first, right, 1), group.isend(second, right, 2),
                           group.isend(none, right, 3)};
  Tensor got_second = zeros({3}, {.dtype = DType::Int64}), got_first = zeros({1001});
  Tensor got_none = zeros({0});
  EXPECT_EQ(group.recv(got_second, left, 2), left);
  EXPECT_EQ(group.recv(got_first, left, 1), left);
  group.recv(got_none, left, 3);
  for (auto& send : sends) send->wait();
  EXPECT_EQ(got_first.data<float>()[1000], static_cast<float>(left));
  EXPECT_EQ(got_second.to_vector<int64_t>(), std::vector<int64_t>(3, left * 10));
  std::string out_of_range = "[";
  out_of_range += group.backend_name();
  out_of_range += "] irecv: src 3 is out of range for 3 ranks (kAnySource is -1)";
  EXPECT_TRUE(contains(error_message([&] { group.irecv(got_first, 3); }), out_of_range));
  // batch_isend_irecv(): both directions of the ring at once, by tag, one Work per op.
  Tensor to_left = full({5}, rank + 100), to_right = full({5}, rank + 200);
  Tensor from_left = zeros({5}), from_right = zeros({5});
  const std::vector<std::shared_ptr<Work>> batch =
      group.batch_isend_irecv({P2POp::send(to_left, left, 4), P2POp::send(to_right, right, 4),
                               P2POp::recv(from_right, right, 4), P2POp::recv(from_left, left, 4)});
  ASSERT_EQ(batch.size(), 4u);
  for (const auto& work : batch) work->wait();
  EXPECT_EQ(from_left.data<float>()[4], static_cast<float>(left + 200));
  EXPECT_EQ(from_right.data<float>()[4], static_cast<float>(right + 100));
  // Rank 0 receives from whoever sends first, twice; a barrier queued before does not hold the
  // messages back (point-to-point does not wait in the collectives' queue).
  if (rank == 0) {
    std::vector<int> sources;
    for (int k = 0; k < size - 1; ++k) {
      Tensor t = zeros({2});
      const int source = group.recv(t, kAnySource, 7);
      EXPECT_EQ(t.data<float>()[0], static_cast<float>(source * 5));
      sources.push_back(source);
    }
    std::sort(sources.begin(), sources.end());
    EXPECT_EQ(sources, (std::vector<int>{1, 2}));
    group.barrier()->wait();
  } else {
    auto barrier = group.barrier();  // cannot finish before rank 0 has received
    group.send(full({2}, rank * 5), 0, 7);
    barrier->wait();
  }
}

}  // namespace tandem::parallel::testing
