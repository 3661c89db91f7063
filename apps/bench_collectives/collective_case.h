#pragma once
/// The collectives bench_collectives times, each with nccl-tests' size and bus-bandwidth factor
/// (Note [Bus bandwidth]), and the buffers of one collective at one size.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "parallel/comm/process_group.h"

namespace tandem::apps {

enum class Collective {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,            ///< the list form, torch's all_gather
  AllGatherIntoTensor,  ///< the flat form, torch's all_gather_into_tensor (ZeRO's)
  Gather,
  Scatter,
  ReduceScatter,  ///< the flat form, torch's reduce_scatter_tensor (ZeRO's)
  AllToAll,       ///< torch's all_to_all_single, even splits
};

/// "all_reduce", "broadcast", ... (the --collectives names, also the PyTorch twin's).
const char* collective_name(Collective collective);
/// Every collective, in the order the table lists them.
const std::vector<Collective>& all_collectives();
/// The collective named `name`; throws "[bench_collectives] unknown collective ..." listing them.
Collective collective_from_name(const std::string& name);

/// busbw / algbw at `ranks` ranks (Note [Bus bandwidth]).
double bus_factor(Collective collective, int ranks);

/// One collective's buffers for one size, made once, reused by every timed call: float32 on the
/// group's tensor device, root 0 where there is a root.
class CollectiveCase {
 public:
  /// `bytes` is nccl-tests' size S (Note [Bus bandwidth]); where S is split into one part per
  /// rank, each part is rounded down to whole elements, and bytes() says what was kept.
  /// Throws when S holds less than one element per part.
  CollectiveCase(parallel::ProcessGroup& group, Collective collective, int64_t bytes);

  int64_t bytes() const { return part_elements_ * parts_ * 4; }
  /// Fills the inputs with values that say who sent them, runs the collective once, and throws
  /// "[bench_collectives] <collective> ... wrong result" unless this rank's outputs hold what
  /// the collective should have put there; then zeroes every buffer, so that no timed sum grows.
  void check();
  /// Starts the collective on the buffers.
  std::shared_ptr<parallel::Work> launch();

 private:
  void fill_inputs();
  void expect(const Tensor& tensor, int64_t part, double value) const;
  void expect_outputs();

  parallel::ProcessGroup& group_;
  Collective collective_;
  int ranks_;
  int64_t parts_;                ///< 1, or ranks_ where S is one part per rank
  int64_t part_elements_;        ///< elements in each part
  Tensor input_;                 ///< the buffer (in place), or the flat input
  Tensor output_;                ///< flat output (into_tensor, reduce_scatter, all_to_all, scatter)
  std::vector<Tensor> inputs_;   ///< scatter's root parts
  std::vector<Tensor> outputs_;  ///< all_gather's and gather's parts
};

}  // namespace tandem::apps
