#include "parallel/join.h"

#include "engine/autograd/grad_mode.h"
#include "engine/ops/factory.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/sync_batch_norm.h"

namespace tandem::parallel {

Join::Join(DistributedDataParallel& ddp, JoinOptions options)
    : ddp_(ddp), options_(std::move(options)) {
  TANDEM_CHECK(ddp_.join_ == nullptr, "[Join] this DDP model is already under a Join");
  TANDEM_CHECK(!has_sync_batchnorm(ddp_.module()),
               "[Join] a model with SyncBatchNorm cannot join (as in PyTorch): its forward runs "
               "collectives that a rank without data cannot answer; give every rank the same "
               "number of batches (pad or drop the remainder)");
  ddp_.join_ = this;
}

Join::~Join() {
  ddp_.join_ = nullptr;
  if (!options_.divide_by_initial_world_size)
    ddp_.reducer().set_divisor(ddp_.process_group().size());
}

// Note [Join protocol]: [training flag per rank, sync, stop], summed over ranks.
Join::Round Join::exchange(bool training, bool sync) {
  ProcessGroup& group = ddp_.process_group();
  const int world = group.size();
  std::vector<float> mine(static_cast<size_t>(world) + 2, 0.0f);
  mine[static_cast<size_t>(group.rank())] = training ? 1.0f : 0.0f;
  mine[static_cast<size_t>(world)] = training && sync ? 1.0f : 0.0f;
  mine[static_cast<size_t>(world) + 1] =
      options_.stop_requested && options_.stop_requested() ? 1.0f : 0.0f;
  NoGradGuard no_grad;
  Tensor flags = from_vector(mine, {world + 2}).to(group.tensor_device());
  try {
    group.allreduce({flags}, ReduceOp::Sum)->synchronize();  // the host reads it next
  } catch (const Error& e) {
    TANDEM_FAIL("[Join] the all-reduce of who still trains failed: ", e.message());
  }
  const std::vector<float> sums = flags.to_vector<float>();
  Round round;
  for (int r = 0; r < world; ++r) {
    const bool trains = sums[static_cast<size_t>(r)] > 0;
    round.training.push_back(trains);
    if (!trains) continue;
    ++round.training_count;
    if (round.first_training < 0) round.first_training = r;
  }
  const auto syncing = static_cast<int>(sums[static_cast<size_t>(world)]);
  TANDEM_CHECK(syncing == 0 || syncing == round.training_count, "[Join] in one step ", syncing,
               " of the ", round.training_count,
               " training ranks synchronise gradients and the "
               "others run under no_sync(): every rank must accumulate alike");
  round.sync = syncing > 0;
  round.stop = sums[static_cast<size_t>(world) + 1] > 0;
  if (round.training_count > 0) last_with_training_ = round;
  stop_agreed_ = round.stop;
  return round;
}

int Join::notify_training_step(bool sync) {
  TANDEM_CHECK(!finished_, "[Join] a forward after finish(): use a new Join for the next epoch");
  const Round round = exchange(/*training=*/true, sync);
  if (!options_.divide_by_initial_world_size && round.sync) {
    ddp_.reducer().set_divisor(round.training_count);
  }
  return round.first_training;
}

bool Join::finish(const std::vector<Tensor>& also_sync) {
  TANDEM_CHECK(!finished_, "[Join] finish() was already called");
  finished_ = true;
  while (true) {
    const Round round = exchange(/*training=*/false, /*sync=*/false);
    if (round.stop) return false;
    if (round.training_count == 0) break;
    ddp_.shadow_step(round.first_training, round.sync);
  }
  equalize(also_sync);
  return true;
}

// Note [Join final model]: every rank saw the same rounds, so all agree on the source.
void Join::equalize(const std::vector<Tensor>& also_sync) {
  const Round& last = last_with_training_;
  if (last.training_count == 0 || last.training_count == ddp_.process_group().size()) return;
  NoGradGuard no_grad;
  std::vector<Tensor> state;
  for (const auto& [name, tensor] : ddp_.module().state_dict()) state.push_back(tensor);
  for (const Tensor& tensor : also_sync) {
    TANDEM_CHECK(tensor.defined(), "[Join] finish(): a tensor to equalise is undefined");
    state.push_back(tensor);
  }
  broadcast_coalesced(ddp_.process_group(), state, last.first_training);
}

}  // namespace tandem::parallel
