#include "parallel/launch/restart_rounds.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <set>
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
    : store_(std::move(store)), options_(std::move(options)) {
  TANDEM_CHECK(store_ != nullptr, "[tandem-run] restart rounds need a store");
  TANDEM_CHECK(options_.node_rank >= 0 && options_.node_rank < options_.nnodes,
               "[tandem-run] node ", options_.node_rank, " is out of range for ", options_.nnodes,
               " nodes");
  if (options_.min_nodes == 0) options_.min_nodes = options_.nnodes;
  TANDEM_CHECK(options_.min_nodes >= 1 && options_.min_nodes <= options_.nnodes,
               "[tandem-run] a round needs 1 to ", options_.nnodes, " nodes, not at least ",
               options_.min_nodes);
  if (options_.identity.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    options_.identity = "pid " + std::to_string(::getpid()) + " on " + host;
  }
}

std::string RestartRounds::key(int round, const std::string& name) const {
  return std::string(kRoundKey) + "/" + std::to_string(round) + "/" + name;
}

std::optional<int> RestartRounds::join(const std::function<bool()>& cancelled) {
  const auto deadline = Clock::now() + options_.rdzv_timeout;
  if (claim_ == 0) claim(cancelled);
  while (true) {
    throw_if_ended();
    beat();
    const int round =
        static_cast<int>(parse_round_int(std::to_string(store_->add(kRoundKey, 0)), 0, INT_MAX - 1,
                                         {.key = kRoundKey, .store = options_.store_name}));
    if (store_->check({key(round, "closed")})) {
      // Its closer has yet to move the counter on (Note [Restart rounds]).
      if (cancelled()) return std::nullopt;
      TANDEM_CHECK(Clock::now() < deadline, "[tandem-run] attempt ", round,
                   " was closed but no next attempt began within --rdzv-timeout (",
                   net::format_duration(options_.rdzv_timeout), ")");
      std::this_thread::sleep_for(options_.poll_interval);
      continue;
    }
    const int64_t ticket = store_->add(key(round, "joined"), 1);
    parse_round_int(std::to_string(ticket), 1, INT_MAX,
                    {.key = key(round, "joined"), .store = options_.store_name});
    const std::string id = std::to_string(options_.node_rank);
    store_->set(key(round, "ticket/" + std::to_string(ticket)), to_bytes(id));
    store_->set(key(round, "node/" + id), to_bytes("1"));
    if (ticket > options_.nnodes) {  // running or over without us: everyone starts anew
      close_round(round);
      continue;
    }
    round_ = round;
    auto members = wait_for_members(round, ticket, deadline, cancelled);
    if (members && confirmed_by_all(round, *members, cancelled)) {
      members_ = std::move(*members);
      return round;
    }
    if (cancelled()) return std::nullopt;
  }
}

std::optional<std::vector<int>> RestartRounds::wait_for_members(
    int round, int64_t ticket, Clock::time_point deadline, const std::function<bool()>& cancelled) {
  std::optional<Clock::time_point> enough_since;  // min_nodes joined (Note [Elastic rounds])
  while (true) {
    beat();
    if (store_->check({key(round, "members")})) {
      RoundMembers members = read_members(round, ticket);
      if (ticket > members.tickets) {
        close_round(round);  // sealed without this node: every node starts anew with it
        return std::nullopt;
      }
      if (static_cast<int>(members.ids.size()) < options_.min_nodes) {
        close_round(round);  // a launcher started again by hand held two of its tickets
        return std::nullopt;
      }
      return std::move(members.ids);
    }
    if (store_->check({key(round, "closed")})) return std::nullopt;
    throw_if_ended();
    if (cancelled()) return std::nullopt;
    const int64_t joined = store_->add(key(round, "joined"), 0);
    if (joined >= options_.min_nodes && !enough_since) enough_since = Clock::now();
    const auto now = Clock::now();  // enough nodes start at the last call, or at the deadline
    if (joined >= options_.nnodes ||
        (enough_since && (now - *enough_since >= options_.last_call || now >= deadline))) {
      seal(round);
      continue;
    }
    if (now >= deadline) throw_timeout(round, joined);
    std::this_thread::sleep_for(options_.poll_interval);
  }
}

// Note [Elastic rounds]: the first launcher here writes the members; a ticket's id is set right
// after the ticket is taken, so get() waits for it at most that long.
void RestartRounds::seal(int round) {
  if (store_->add(key(round, "sealed"), 1) != 1) return;
  const int64_t tickets = std::min<int64_t>(store_->add(key(round, "joined"), 0), options_.nnodes);
  std::set<int> ids;
  for (int64_t t = 1; t <= tickets; ++t) ids.insert(read_ticket_id(round, t));
  std::string text = std::to_string(tickets) + ";";
  for (int id : ids) {
    if (text.back() != ';') text += ',';
    text += std::to_string(id);
  }
  store_->set(key(round, "members"), to_bytes(text));
  mark_dropped(round, ids);
}

// Note [Node claims]: a node that was a member of the round before and is not of this one was
// lost (a live launcher joins every round): its holder's claim is marked, so that a launcher
// started again for that node takes over at once rather than watching the dead one's beat for
// lost_after, while the job it means to rejoin may be ending.
void RestartRounds::mark_dropped(int round, const std::set<int>& ids) {
  if (round == 0) return;
  const std::string previous = key(round - 1, "members");
  if (!store_->check({previous})) return;
  const RoundMembers before = parse_members(to_string(store_->get(previous)), options_.nnodes,
                                            {.key = previous, .store = options_.store_name});
  for (int id : before.ids) {
    const std::string holder = node_key(id, "holder");
    if (ids.count(id) > 0 || !store_->check({holder})) continue;
    store_->set(node_key(id, "lost/" + to_string(store_->get(holder))), to_bytes("1"));
  }
}

bool RestartRounds::confirmed_by_all(int round, const std::vector<int>& members,
                                     const std::function<bool()>& cancelled) {
  store_->set(key(round, "ready/" + std::to_string(options_.node_rank)), to_bytes("1"));
  std::vector<std::string> ready;
  ready.reserve(members.size());
  for (int id : members) ready.push_back(key(round, "ready/" + std::to_string(id)));
  const auto deadline = Clock::now() + options_.confirm_timeout;
  while (!store_->check(ready)) {
    beat();
    if (store_->check({key(round, "closed")})) return false;
    throw_if_ended();
    if (cancelled()) return false;
    if (Clock::now() >= deadline) {
      close_round(round);  // a member was lost since it joined: the next round goes on without it
      return false;
    }
    std::this_thread::sleep_for(options_.poll_interval);
  }
  return true;
}

void RestartRounds::throw_timeout(int round, int64_t joined) {
  const std::string limit = net::format_duration(options_.rdzv_timeout);
  if (options_.min_nodes == options_.nnodes) {
    TANDEM_FAIL("[tandem-run] node ", options_.node_rank, ": the other nodes did not join attempt ",
                round, " within --rdzv-timeout (", limit, "); missing: node ",
                missing_nodes(round));
  }
  TANDEM_FAIL("[tandem-run] node ", options_.node_rank, ": only ", joined, " of at least ",
              options_.min_nodes, " nodes (--nnodes ", options_.min_nodes, ":", options_.nnodes,
              ") joined attempt ", round, " within --rdzv-timeout (", limit, "); missing: node ",
              missing_nodes(round));
}

int RestartRounds::group_rank() const {
  const auto at = std::find(members_.begin(), members_.end(), options_.node_rank);
  return static_cast<int>(at - members_.begin());
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
  beat();
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
              " cannot start another attempt: ", printable(to_string(store_->get(kEndedKey))));
}

RoundMembers RestartRounds::read_members(int round, int64_t ticket) {
  const std::string name = key(round, "members");
  const std::string text = to_string(store_->get(name));
  try {
    RoundMembers members =
        parse_members(text, options_.nnodes, {.key = name, .store = options_.store_name});
    const bool listed =
        std::binary_search(members.ids.begin(), members.ids.end(), options_.node_rank);
    TANDEM_CHECK(ticket > members.tickets || listed, "[tandem-run] ", options_.store_name,
                 " holds ", quote_value(text), " under ", name, ", which leaves out node ",
                 options_.node_rank, " although its ticket ", ticket,
                 " was sealed in; did another program write it?");
    return members;
  } catch (const Error& e) {
    end_for_bad_value(e);
  }
}

int RestartRounds::read_ticket_id(int round, int64_t ticket) {
  const std::string name = key(round, "ticket/" + std::to_string(ticket));
  try {
    return static_cast<int>(parse_round_int(to_string(store_->get(name)), 0, options_.nnodes - 1,
                                            {.key = name, .store = options_.store_name}));
  } catch (const Error& e) {
    end_for_bad_value(e);
  }
}

void RestartRounds::end_for_bad_value(const Error& error) {
  try {
    // Every node reads the same value, but only this one may have read a ticket: end it for all.
    std::string why = error.message();
    if (why.rfind("[tandem-run] ", 0) == 0) why.erase(0, 13);
    end_job("node " + std::to_string(options_.node_rank) + " stopped the job: " + why);
  } catch (const Error&) {
  }
  throw error;
}

}  // namespace tandem::parallel
