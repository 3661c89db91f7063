#pragma once
/// A StatisticsReducer for one rank: synchronised batch norm's arithmetic without a process group
/// (tests/parallel runs it across ranks). Counts its calls.

#include "nn/sync_batch_norm.h"

namespace tandem::testing {

class OneRankReducer final : public nn::StatisticsReducer {
 public:
  void sum_over_ranks(Tensor&) override { ++calls; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int calls = 0;
};

}  // namespace tandem::testing
