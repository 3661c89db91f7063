// RestartRounds' claims and beats (Note [Node claims] in restart_rounds.h): who holds each
// --node-rank, and whether the launcher holding it is still there.
#include <algorithm>
#include <cstdint>
#include <map>
#include <thread>

#include "engine/error.h"
#include "parallel/comm/socket.h"
#include "parallel/launch/restart_rounds.h"

namespace tandem::parallel {
namespace {

using Clock = std::chrono::steady_clock;

// Earlier claims watched by a new one: enough for every launcher of this node started again by
// hand in one job, bounded so that a store full of forged claims costs a few requests.
constexpr int64_t kClaimsWatched = 8;

}  // namespace

std::string RestartRounds::node_key(int node, const std::string& name) const {
  return "tandem-run/node/" + std::to_string(node) + "/" + name;
}

void RestartRounds::beat() {
  if (claim_ > 0) store_->add(node_key(options_.node_rank, "beat/" + std::to_string(claim_)), 1);
}

int64_t RestartRounds::beat_of(int node) {
  // The holder, not the newest claim: that may be a second launcher refused a moment ago.
  const std::string holder = node_key(node, "holder");
  if (!store_->check({holder})) return -1;
  const int64_t claim = parse_round_int(to_string(store_->get(holder)), 1, INT64_MAX,
                                        {.key = holder, .store = options_.store_name});
  return store_->add(node_key(node, "beat/" + std::to_string(claim)), 0);
}

void RestartRounds::claim(const std::function<bool()>& cancelled) {
  const int id = options_.node_rank;
  claim_ = store_->add(node_key(id, "claims"), 1);
  store_->set(node_key(id, "claim/" + std::to_string(claim_)), to_bytes(options_.identity));
  beat();
  // An earlier claim whose beat moves while this launcher watches is a live launcher.
  std::map<int64_t, int64_t> beats;  // claim -> its beat count when first read
  for (int64_t c = std::max<int64_t>(1, claim_ - kClaimsWatched); c < claim_; ++c) {
    // A claim dropped from a round (mark_dropped) is a lost launcher's: nothing to watch.
    if (store_->check({node_key(id, "lost/" + std::to_string(c))})) continue;
    beats[c] = store_->add(node_key(id, "beat/" + std::to_string(c)), 0);
  }
  const auto deadline = Clock::now() + options_.lost_after;
  while (!beats.empty() && Clock::now() < deadline && !cancelled()) {
    std::this_thread::sleep_for(options_.poll_interval);
    beat();
    for (const auto& [c, count] : beats) {
      if (store_->add(node_key(id, "beat/" + std::to_string(c)), 0) == count) continue;
      const std::string other = to_string(store_->get(node_key(id, "claim/" + std::to_string(c))));
      TANDEM_FAIL("[tandem-run] two launchers claim --node-rank ", id, ": ", printable(other),
                  " (running) and ", options_.identity,
                  " (this one, refused); give each node its own --node-rank");
    }
  }
  store_->set(node_key(id, "holder"), to_bytes(std::to_string(claim_)));
}

std::optional<std::string> RestartRounds::finish() {
  try {
    store_->set(key(round_, "done/" + std::to_string(options_.node_rank)), to_bytes("1"));
    if (options_.node_rank != 0) return std::nullopt;
    return wait_for_members_done();
  } catch (const Error&) {
    // The job is over for this node; a store that went away has nothing left to serve.
    return std::nullopt;
  }
}

// Node 0 hosts the store, so it stays until every member is done. A member whose launcher has
// not beaten for lost_after is gone (Note [Node claims]): its workers died with it.
std::optional<std::string> RestartRounds::wait_for_members_done() {
  struct Heard {
    int64_t beat;
    Clock::time_point at;
  };
  std::map<int, Heard> waiting;  // member -> when its beat last moved
  for (int id : members_) waiting[id] = {beat_of(id), Clock::now()};
  const auto deadline = Clock::now() + options_.rdzv_timeout;
  while (!closed()) {
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (store_->check({key(round_, "done/" + std::to_string(it->first))})) {
        it = waiting.erase(it);
        continue;
      }
      const int64_t now_beat = beat_of(it->first);
      if (now_beat != it->second.beat) it->second = {now_beat, Clock::now()};
      if (Clock::now() - it->second.at >= options_.lost_after) {
        return "[tandem-run] node " + std::to_string(it->first) + "'s launcher was lost during " +
               "attempt " + std::to_string(round_) + " (not heard from for " +
               net::format_duration(options_.lost_after) +
               "); its workers did not finish, so the job did not";
      }
      ++it;
    }
    if (waiting.empty()) return std::nullopt;
    if (Clock::now() >= deadline) {
      return "[tandem-run] node " + std::to_string(waiting.begin()->first) +
             " did not finish attempt " + std::to_string(round_) + " within --rdzv-timeout (" +
             net::format_duration(options_.rdzv_timeout) + ") after node 0's workers did";
    }
    std::this_thread::sleep_for(options_.poll_interval);
  }
  return std::nullopt;
}

}  // namespace tandem::parallel
