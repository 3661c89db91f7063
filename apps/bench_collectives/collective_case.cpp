#include "apps/bench_collectives/collective_case.h"

#include <array>

#include "engine/error.h"
#include "engine/ops/factory.h"

namespace tandem::apps {

// --- Note [Bus bandwidth]
// Sizes, algbw and busbw are nccl-tests' (doc/PERFORMANCE.md in github.com/NVIDIA/nccl-tests, and
// each src/<collective>.cu's GetBw), so a row reads like an nccl-tests row:
//   size S   the largest buffer of one rank: the buffer of all_reduce, broadcast and reduce; the
//            whole gathered output of all_gather and gather (n parts of S/n, one per rank); the
//            whole input of reduce_scatter and scatter; each rank's input of all_to_all
//   algbw    S / t, t the time of one collective
//   busbw    algbw × a factor that turns it into what each rank's link carries, comparable
//            across rank counts and with the link's own speed: 2(n-1)/n for all_reduce (a
//            reduce-scatter then an all-gather); (n-1)/n for reduce_scatter, all_gather,
//            all_to_all, gather and scatter (each rank keeps its own part, the other n-1 cross
//            links); 1 for broadcast and reduce (all of S leaves or reaches the root)
// t is the slowest rank's mean (bench_collectives' main.cpp), so a root that finishes first
// does not make broadcast look faster than its receivers saw it.

namespace {

struct Entry {
  Collective collective;
  const char* name;
  bool split;  // S is n parts of S/n, one per rank
};

constexpr std::array<Entry, 9> kEntries = {{
    {Collective::AllReduce, "all_reduce", false},
    {Collective::Broadcast, "broadcast", false},
    {Collective::Reduce, "reduce", false},
    {Collective::AllGather, "all_gather", true},
    {Collective::AllGatherIntoTensor, "all_gather_into_tensor", true},
    {Collective::Gather, "gather", true},
    {Collective::Scatter, "scatter", true},
    {Collective::ReduceScatter, "reduce_scatter", true},
    {Collective::AllToAll, "all_to_all", true},
}};

const Entry& entry_of(Collective collective) {
  for (const Entry& entry : kEntries) {
    if (entry.collective == collective) return entry;
  }
  TANDEM_FAIL("[bench_collectives] unknown collective ", static_cast<int>(collective));
}

}  // namespace

const char* collective_name(Collective collective) {
  return entry_of(collective).name;
}

const std::vector<Collective>& all_collectives() {
  static const std::vector<Collective> all = [] {
    std::vector<Collective> out;
    out.reserve(kEntries.size());
    for (const Entry& entry : kEntries) out.push_back(entry.collective);
    return out;
  }();
  return all;
}

Collective collective_from_name(const std::string& name) {
  std::string known;
  for (const Entry& entry : kEntries) {
    if (name == entry.name) return entry.collective;
    known += (known.empty() ? "" : ", ") + std::string(entry.name);
  }
  TANDEM_FAIL("[bench_collectives] unknown collective '", name, "'; known: ", known);
}

double bus_factor(Collective collective, int ranks) {
  const double n = ranks;
  switch (collective) {
    case Collective::AllReduce: return 2.0 * (n - 1) / n;
    case Collective::Broadcast:
    case Collective::Reduce: return 1.0;
    default: return (n - 1) / n;
  }
}

CollectiveCase::CollectiveCase(parallel::ProcessGroup& group, Collective collective, int64_t bytes)
    : group_(group),
      collective_(collective),
      ranks_(group.size()),
      parts_(entry_of(collective).split ? group.size() : 1),
      part_elements_(bytes / 4 / parts_) {
  TANDEM_CHECK(part_elements_ > 0, "[bench_collectives] ", collective_name(collective), " of ",
               bytes, " bytes at ", ranks_, " ranks: less than one float32 per rank");
  const TensorOptions on{.device = group.tensor_device()};
  const int64_t whole = part_elements_ * parts_;
  const bool root = group.rank() == 0;
  switch (collective) {
    case Collective::AllReduce:
    case Collective::Broadcast:
    case Collective::Reduce: input_ = empty({whole}, on); break;
    case Collective::AllGather:
    case Collective::Gather:
      input_ = empty({part_elements_}, on);
      if (collective == Collective::AllGather || root) {
        for (int r = 0; r < ranks_; ++r) outputs_.push_back(empty({part_elements_}, on));
      }
      break;
    case Collective::AllGatherIntoTensor:
      input_ = empty({part_elements_}, on);
      output_ = empty({whole}, on);
      break;
    case Collective::Scatter:
      output_ = empty({part_elements_}, on);
      if (root) {
        for (int r = 0; r < ranks_; ++r) inputs_.push_back(empty({part_elements_}, on));
      }
      break;
    case Collective::ReduceScatter:
      input_ = empty({whole}, on);
      output_ = empty({part_elements_}, on);
      break;
    case Collective::AllToAll:
      input_ = empty({whole}, on);
      output_ = empty({whole}, on);
      break;
  }
}

std::shared_ptr<parallel::Work> CollectiveCase::launch() {
  switch (collective_) {
    case Collective::AllReduce: return group_.allreduce({input_});
    case Collective::Broadcast: return group_.broadcast({input_}, 0);
    case Collective::Reduce: return group_.reduce({input_}, 0);
    case Collective::AllGather: return group_.allgather(outputs_, input_);
    case Collective::AllGatherIntoTensor: return group_.allgather_into_tensor(output_, input_);
    case Collective::Gather: return group_.gather(outputs_, input_, 0);
    case Collective::Scatter: return group_.scatter(output_, inputs_, 0);
    case Collective::ReduceScatter: return group_.reduce_scatter_tensor(output_, input_);
    case Collective::AllToAll: return group_.alltoall_single(output_, input_);
  }
  TANDEM_FAIL("[bench_collectives] unknown collective");
}

// Rank r sends r + 1 (scatter's root: r + 1 to rank r; all_to_all: rank r sends r·n + s + 1 to
// rank s), so every output element says where it came from.
void CollectiveCase::fill_inputs() {
  const double own = group_.rank() + 1;
  if (input_.defined()) input_.fill_(own);
  for (size_t r = 0; r < inputs_.size(); ++r) inputs_[r].fill_(static_cast<double>(r + 1));
  if (collective_ == Collective::AllToAll) {
    for (int s = 0; s < ranks_; ++s) {
      input_.slice(s * part_elements_, (s + 1) * part_elements_)
          .fill_(group_.rank() * ranks_ + s + 1);
    }
  }
}

// The first and last element of part `part` of `tensor` (read through item(), so on any device).
void CollectiveCase::expect(const Tensor& tensor, int64_t part, double value) const {
  for (const int64_t at : {part * part_elements_, (part + 1) * part_elements_ - 1}) {
    const double got = tensor.slice(at, at + 1).item();
    TANDEM_CHECK(got == value, "[bench_collectives] ", collective_name(collective_),
                 ": wrong result on rank ", group_.rank(), ": element ", at, " is ", got,
                 ", expected ", value);
  }
}

void CollectiveCase::expect_outputs() {
  const int rank = group_.rank();
  const double sum = ranks_ * (ranks_ + 1) / 2.0;
  switch (collective_) {
    case Collective::AllReduce: expect(input_, 0, sum); break;
    case Collective::Broadcast: expect(input_, 0, 1.0); break;
    case Collective::Reduce: expect(input_, 0, rank == 0 ? sum : rank + 1); break;
    case Collective::AllGather:
    case Collective::Gather:
      for (size_t r = 0; r < outputs_.size(); ++r) expect(outputs_[r], 0, r + 1.0);
      break;
    case Collective::AllGatherIntoTensor:
      for (int r = 0; r < ranks_; ++r) expect(output_, r, r + 1.0);
      break;
    case Collective::Scatter: expect(output_, 0, rank + 1.0); break;
    case Collective::ReduceScatter: expect(output_, 0, sum); break;
    case Collective::AllToAll:
      for (int r = 0; r < ranks_; ++r) expect(output_, r, r * ranks_ + rank + 1.0);
      break;
  }
}

void CollectiveCase::check() {
  fill_inputs();
  launch()->synchronize();
  expect_outputs();
  for (Tensor* tensor : {&input_, &output_}) {
    if (tensor->defined()) tensor->zero_();
  }
  for (Tensor& tensor : inputs_) tensor.zero_();
  for (Tensor& tensor : outputs_) tensor.zero_();
}

}  // namespace tandem::apps
