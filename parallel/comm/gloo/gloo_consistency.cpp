// Note [Collective consistency] on Gloo: the ranks all-gather a fingerprint of their call and,
// only when the fingerprints differ, the calls themselves, so every rank builds the same message
// (collective_checks.h). Runs on the group's thread just before the collective.
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>

#include "parallel/comm/collective_checks.h"
#include "parallel/comm/gloo/gloo_process_group.h"

namespace tandem::parallel {
namespace {

std::vector<int64_t> allgather_counts(const std::shared_ptr<gloo::Context>& context,
                                      std::vector<int64_t> mine, uint32_t tag,
                                      std::chrono::milliseconds timeout) {
  std::vector<int64_t> all(mine.size() * static_cast<size_t>(context->size));
  gloo::AllgatherOptions options(context);
  options.setInput(mine.data(), mine.size());
  options.setOutput(all.data(), all.size());
  options.setTag(tag);
  options.setTimeout(timeout);
  gloo::allgather(options);
  return all;
}

// Every rank's description, given their lengths.
std::vector<std::string> allgather_calls(const std::shared_ptr<gloo::Context>& context,
                                         const std::string& mine,
                                         const std::vector<size_t>& lengths, uint32_t tag,
                                         std::chrono::milliseconds timeout) {
  std::vector<char> input(mine.begin(), mine.end());
  size_t total = 0;
  for (const size_t length : lengths) total += length;
  std::vector<char> all(total);
  gloo::AllgathervOptions options(context);
  options.setInput(input.data(), input.size());
  options.setOutput(all.data(), lengths);
  options.setTag(tag);
  options.setTimeout(timeout);
  gloo::allgatherv(options);
  std::vector<std::string> calls;
  size_t offset = 0;
  for (const size_t length : lengths) {
    calls.emplace_back(all.data() + offset, length);
    offset += length;
  }
  return calls;
}

}  // namespace

std::string GlooProcessGroup::check_consistency(const Task& task) {
  const auto n = static_cast<size_t>(size());
  const auto timeout = options().timeout;
  const std::vector<int64_t> prints = allgather_counts(
      context_,
      {static_cast<int64_t>(fingerprint(task.call)), static_cast<int64_t>(task.call.size())},
      next_tag_++, timeout);
  bool agree = true;
  std::vector<size_t> lengths;
  for (size_t r = 0; r < n; ++r) {
    agree = agree && prints[2 * r] == prints[0] && prints[2 * r + 1] == prints[1];
    lengths.push_back(static_cast<size_t>(prints[2 * r + 1]));
  }
  if (!agree) {
    std::string mismatch =
        describe_mismatch(allgather_calls(context_, task.call, lengths, next_tag_++, timeout));
    if (!mismatch.empty()) return mismatch;
  }
  // Equal calls: every rank is at an alltoall here, or none is.
  if (task.alltoall_counts.empty()) return "";
  const std::vector<int64_t> all =
      allgather_counts(context_, task.alltoall_counts, next_tag_++, timeout);
  std::vector<std::vector<int64_t>> by_rank;
  for (size_t r = 0; r < n; ++r) {
    by_rank.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(r * 2 * n),
                         all.begin() + static_cast<std::ptrdiff_t>((r + 1) * 2 * n));
  }
  return alltoall_counts_mismatch(by_rank);
}

}  // namespace tandem::parallel
