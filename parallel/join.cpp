#include "parallel/join.h"

#include "engine/autograd/grad_mode.h"
#include "engine/ops/factory.h"

namespace tandem::parallel {
namespace {

ProcessGroup& group_of(const std::vector<std::reference_wrapper<Joinable>>& joinables) {
  TANDEM_CHECK(!joinables.empty(), "[Join] needs at least one joinable");
  return joinables.front().get().join_process_group();
}

}  // namespace

Join::Join(std::vector<std::reference_wrapper<Joinable>> joinables, JoinOptions options)
    : group_(group_of(joinables)), options_(std::move(options)) {
  flag_count_ = joinables.front().get().join_round_flags();
  for (Joinable& joinable : joinables) {
    TANDEM_CHECK(&joinable.join_process_group() == &group_,
                 "[Join] every joinable must use the same process group");
    joinables_.push_back(&joinable);
    hooks_.push_back(joinable.join_hook(*this));
  }
}

Join::~Join() {
  hooks_.clear();  // first: they undo what they set (JoinHook), and may read options_
}

// Note [Join protocol]: [training flag per rank, stop, the first joinable's flags], summed.
JoinRound Join::exchange(bool training, const std::vector<bool>& flags) {
  const int world = group_.size();
  const auto at = [world](int i) { return static_cast<size_t>(world) + static_cast<size_t>(i); };
  std::vector<float> mine(at(1 + flag_count_), 0.0f);
  mine[static_cast<size_t>(group_.rank())] = training ? 1.0f : 0.0f;
  mine[at(0)] = options_.stop_requested && options_.stop_requested() ? 1.0f : 0.0f;
  for (int f = 0; training && f < flag_count_; ++f)
    mine[at(1 + f)] = flags[static_cast<size_t>(f)] ? 1.0f : 0.0f;
  NoGradGuard no_grad;
  Tensor sums_tensor = from_vector(mine, {static_cast<int64_t>(mine.size())});
  sums_tensor = sums_tensor.to(group_.tensor_device());
  try {
    group_.allreduce({sums_tensor}, ReduceOp::Sum)->synchronize();  // the host reads it next
  } catch (const Error& e) {
    TANDEM_FAIL("[Join] the all-reduce of who still trains failed: ", e.message());
  }
  const std::vector<float> sums = sums_tensor.to_vector<float>();
  JoinRound round;
  for (int r = 0; r < world; ++r) {
    if (sums[static_cast<size_t>(r)] <= 0) continue;
    ++round.training_count;
    if (round.first_training < 0) round.first_training = r;
  }
  round.stop = sums[at(0)] > 0;
  for (int f = 0; f < flag_count_; ++f) round.flags.push_back(static_cast<int>(sums[at(1 + f)]));
  if (round.training_count > 0) last_with_training_ = round;
  stop_agreed_ = round.stop;
  return round;
}

JoinRound Join::notify(const Joinable& joinable, const std::vector<bool>& flags) {
  TANDEM_CHECK(!finished_, "[Join] a forward after finish(): use a new Join for the next epoch");
  TANDEM_CHECK(&joinable == joinables_.front(),
               "[Join] only the first joinable drives the rounds (Note [Join rounds])");
  TANDEM_CHECK(static_cast<int>(flags.size()) == flag_count_, "[Join] notify() with ", flags.size(),
               " flags, expected ", flag_count_);
  return exchange(/*training=*/true, flags);
}

bool Join::finish() {
  TANDEM_CHECK(!finished_, "[Join] finish() was already called");
  finished_ = true;
  while (true) {
    const JoinRound round = exchange(/*training=*/false, {});
    if (round.stop) return false;
    if (round.training_count == 0) break;
    for (const auto& hook : hooks_) hook->main_hook(round);
  }
  // Note [Join final model]: every rank saw the same rounds, so all agree on the source.
  const JoinRound& last = last_with_training_;
  const bool all_trained_to_the_end =
      last.training_count == 0 || last.training_count == group_.size();
  const int source = all_trained_to_the_end ? -1 : last.first_training;
  for (const auto& hook : hooks_) hook->post_hook(source);
  return true;
}

}  // namespace tandem::parallel
