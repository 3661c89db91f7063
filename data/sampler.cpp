#include "data/sampler.h"

#include <numeric>

#include "engine/error.h"
#include "engine/random.h"

namespace tandem::data {

std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // Our own Fisher–Yates: std::shuffle's draws differ between standard libraries.
  Generator generator(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(generator.next_u64() % static_cast<uint64_t>(i + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

namespace {
// Distinct epochs must give unrelated permutations; mixing keeps (seed, epoch) pairs apart.
uint64_t epoch_seed(uint64_t seed, int64_t epoch) {
  return seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch);
}
}  // namespace

SequentialSampler::SequentialSampler(int64_t n) : n_(n) {
  TANDEM_CHECK(n >= 0, "[SequentialSampler] size must be >= 0");
}

std::vector<int64_t> SequentialSampler::indices(int64_t) const {
  std::vector<int64_t> order(static_cast<size_t>(n_));
  std::iota(order.begin(), order.end(), 0);
  return order;
}

RandomSampler::RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {
  TANDEM_CHECK(n >= 0, "[RandomSampler] size must be >= 0");
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const {
  return seeded_permutation(n_, epoch_seed(seed_, epoch));
}

DistributedSampler::DistributedSampler(int64_t n, const DistributedSamplerConfig& config)
    : n_(n), config_(config) {
  const int64_t replicas = config.num_replicas;
  TANDEM_CHECK(replicas >= 1 && config.rank >= 0 && config.rank < replicas,
               "[DistributedSampler] rank ", config.rank, " is not in [0, ", replicas, ")");
  TANDEM_CHECK(n >= 1, "[DistributedSampler] empty data set");
  // PyTorch: drop_last drops the tail that does not fill every rank; otherwise pad up.
  per_rank_ = config.drop_last ? n / replicas : (n + replicas - 1) / replicas;
  if (!config.drop_last && !config.pad) per_rank_ = (n - config.rank + replicas - 1) / replicas;
  TANDEM_CHECK(per_rank_ >= 1, "[DistributedSampler] ", n, " samples cannot give each of ",
               replicas, " ranks one with drop_last");
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (config_.shuffle) {
    order = seeded_permutation(n_, epoch_seed(config_.seed, epoch));
  } else {
    order.resize(static_cast<size_t>(n_));
    std::iota(order.begin(), order.end(), 0);
  }
  const int64_t total = config_.drop_last || config_.pad ? per_rank_ * config_.num_replicas : n_;
  for (size_t i = 0; static_cast<int64_t>(order.size()) < total; ++i)
    order.push_back(order[i]);               // pad
  order.resize(static_cast<size_t>(total));  // drop
  std::vector<int64_t> mine;
  for (int64_t i = config_.rank; i < total; i += config_.num_replicas)
    mine.push_back(order[static_cast<size_t>(i)]);
  return mine;
}

StridedSampler::StridedSampler(int64_t n, int64_t num_replicas, int64_t rank)
    : n_(n), num_replicas_(num_replicas), rank_(rank) {
  TANDEM_CHECK(n >= 0 && num_replicas >= 1 && rank >= 0 && rank < num_replicas,
               "[StridedSampler] needs n >= 0 and 0 <= rank < num_replicas, got n ", n, ", rank ",
               rank, " of ", num_replicas);
}

int64_t StridedSampler::size() const {
  return rank_ < n_ ? (n_ - rank_ + num_replicas_ - 1) / num_replicas_ : 0;
}

std::vector<int64_t> StridedSampler::indices(int64_t) const {
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < n_; i += num_replicas_) mine.push_back(i);
  return mine;
}

}  // namespace tandem::data
