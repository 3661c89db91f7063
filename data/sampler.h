#pragma once
/// Samplers: which data-set indices an epoch visits, in which order. Each is a pure function
/// of the epoch, so any epoch can be replayed (resume) and every rank agrees without talking.

#include <cstdint>
#include <vector>

namespace tandem::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
  /// Number of indices per epoch.
  virtual int64_t size() const = 0;
};

/// 0, 1, …, n − 1 every epoch.
class SequentialSampler final : public Sampler {
 public:
  explicit SequentialSampler(int64_t n);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
};

/// A permutation of 0 … n − 1 drawn from (seed, epoch): reshuffled every epoch, reproducible.
class RandomSampler final : public Sampler {
 public:
  RandomSampler(int64_t n, uint64_t seed);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
  uint64_t seed_;
};

struct DistributedSamplerConfig {
  int64_t num_replicas = 1;
  int64_t rank = 0;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
  /// Without drop_last: pad the shares to equal sizes (PyTorch). false leaves them uneven, the
  /// first n mod R ranks with one index more, every index visited once: for parallel::Join.
  bool pad = true;
};

/// torch.utils.data.DistributedSampler: every rank gets the same number of indices. Without
/// drop_last the permuted list is padded by repeating its start so the union covers the data set;
/// with drop_last its tail is dropped instead; with neither (pad = false) nothing is added or
/// dropped and shares differ by at most one. Rank r takes positions r, r + R, r + 2R, …
///
/// Note [Global batches at any world size]: with a global batch B split over the R ranks (B / R
/// each), rank r's batch s holds positions r + R·(s·B/R + j), so global step s, all ranks'
/// batch s together, holds positions s·B … (s + 1)·B − 1 of the epoch's order: the same images at
/// any R that divides B, with and without drop_last, and unpadded (pad = false) on any data set
/// size. Padded shares differ only in the last step, which holds the padding. That is what lets a
/// job resume in the middle of an epoch at another world size (train_cifar, Note [Resume at
/// another world size]) and train on the same global batches in the same order.
class DistributedSampler final : public Sampler {
 public:
  DistributedSampler(int64_t n, const DistributedSamplerConfig& config);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return per_rank_; }

 private:
  int64_t n_;
  DistributedSamplerConfig config_;
  int64_t per_rank_;
};

/// Rank r's share of 0 … n − 1 for evaluation: r, r + R, r + 2R, … < n, in order and without
/// padding, so per-rank counts summed over ranks are exactly the data set's (ranks may differ in
/// size by one).
class StridedSampler final : public Sampler {
 public:
  StridedSampler(int64_t n, int64_t num_replicas, int64_t rank);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override;

 private:
  int64_t n_;
  int64_t num_replicas_;
  int64_t rank_;
};

/// The permutation RandomSampler and DistributedSampler share (Fisher–Yates on Generator(seed)).
std::vector<int64_t> seeded_permutation(int64_t n, uint64_t seed);

}  // namespace tandem::data
