#include "parallel/comm/restart_rounds.h"

#include <thread>

#include "engine/error.h"
#include "parallel/comm/socket.h"

namespace tandem::parallel {
namespace {

using Clock = std::chrono::steady_clock;

const char* const kRoundKey = "tandem-run/round";
const char* const kEndedKey = "tandem-run/ended";

}  // namespace

RestartRounds::RestartRounds(std::shared_ptr<Store> store, RestartRoundsOptions options)
    : store_(std::move(store)), options_(options) {
  TANDEM_CHECK(store_ != nullptr, "[tandem-run] restart rounds need a store");
  TANDEM_CHECK(options_.node_rank >= 0 && options_.node_rank < options_.nnodes,
               "[tandem-run] node ", options_.node_rank, " is out of range for ", options_.nnodes,
               " nodes");
}

std::string RestartRounds::key(int round, const std::string& name) const {
  return std::string(kRoundKey) + "/" + std::to_string(round) + "/" + name;
}

std::optional<int> RestartRounds::join(const std::function<bool()>& cancelled) {
  const auto deadline = Clock::now() + options_.rdzv_timeout;
  while (true) {
    throw_if_ended();
    const int round = static_cast<int>(store_->add(kRoundKey, 0));
    if (store_->check({key(round, "closed")})) {
      // Its closer has yet to move the counter on (Note [Restart rounds]).
      if (cancelled()) return std::nullopt;
      TANDEM_CHECK(Clock::now() < deadline, "[tandem-run] attempt ", round,
                   " was closed but no next attempt began within --rdzv-timeout (",
                   net::format_duration(options_.rdzv_timeout), ")");
      std::this_thread::sleep_for(options_.poll_interval);
      continue;
    }
    const int64_t joined = store_->add(key(round, "joined"), 1);
    store_->set(key(round, "node/" + std::to_string(options_.node_rank)), to_bytes("1"));
    if (joined > options_.nnodes) {  // running or over without us: everyone starts anew
      close_round(round);
      continue;
    }
    round_ = round;
    if (wait_for_nodes(round, deadline, cancelled)) return round;
    if (cancelled()) return std::nullopt;
  }
}

bool RestartRounds::wait_for_nodes(int round, Clock::time_point deadline,
                                   const std::function<bool()>& cancelled) {
  while (true) {
    if (store_->add(key(round, "joined"), 0) >= options_.nnodes) return true;
    if (store_->check({key(round, "closed")})) return false;
    throw_if_ended();
    if (cancelled()) return false;
    TANDEM_CHECK(Clock::now() < deadline, "[tandem-run] node ", options_.node_rank,
                 ": the other nodes did not join attempt ", round, " within --rdzv-timeout (",
                 net::format_duration(options_.rdzv_timeout), "); missing: node ",
                 missing_nodes(round));
    std::this_thread::sleep_for(options_.poll_interval);
  }
}

std::string RestartRounds::missing_nodes(int round) {
  std::string out;
  for (int node = 0; node < options_.nnodes; ++node) {
    if (store_->check({key(round, "node/" + std::to_string(node))})) continue;
    out += (out.empty() ? "" : ", ") + std::to_string(node);
  }
  return out;
}

bool RestartRounds::closed() {
  return store_->check({key(round_, "closed")});
}

void RestartRounds::close() {
  close_round(round_);
}

void RestartRounds::close_round(int round) {
  // Only the first closer moves the counter, so it moves exactly once per round.
  if (store_->add(key(round, "closed"), 1) == 1) store_->add(kRoundKey, 1);
}

void RestartRounds::end_job(const std::string& reason) {
  store_->set(kEndedKey, to_bytes(reason));
  close();
}

void RestartRounds::throw_if_ended() {
  if (!store_->check({kEndedKey})) return;
  TANDEM_FAIL("[tandem-run] node ", options_.node_rank,
              " cannot start another attempt: ", to_string(store_->get(kEndedKey)));
}

void RestartRounds::finish() {
  try {
    store_->add(key(round_, "done"), 1);
    if (options_.node_rank != 0) return;
    const auto deadline = Clock::now() + options_.rdzv_timeout;
    while (store_->add(key(round_, "done"), 0) < options_.nnodes && !closed() &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(options_.poll_interval);
    }
  } catch (const Error&) {
    // The job is over for this node; a store that went away has nothing left to serve.
  }
}

}  // namespace tandem::parallel
