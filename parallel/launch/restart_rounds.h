#pragma once
/// How the launchers of a multi-node job (tandem-run --max-restarts) agree, through the
/// rendezvous store, that a new attempt begins, so every node restarts its workers together.
///
/// Note [Restart rounds]: attempts are numbered rounds. `tandem-run/round` (an add() counter) is
/// the current one. A launcher joins round r with add("tandem-run/round/<r>/joined", 1): a count
/// above nnodes means the round is already running or over (a launcher restarted by hand, or one
/// late after a failure), so it closes r and joins the next; otherwise it waits, bounded by the
/// rendezvous timeout, until nnodes have joined, then starts its workers with
/// TORCHELASTIC_RESTART_COUNT=r. Closing r is add("tandem-run/round/<r>/closed", 1); whoever
/// gets 1 moves the counter on to r+1, so it moves exactly once per round. While the workers
/// run, each launcher checks about twice a second whether its round was closed; a local failure
/// closes it, and every node then stops its workers and joins r+1. A launcher that gives up, or
/// is interrupted, or runs out of time, also sets `tandem-run/ended` to why, so the others fail
/// at once instead of waiting for it. Node 0's launcher hosts the store: its death ends the job
/// (the others fail on the lost connection), as the death of torchrun's c10d store host does.
/// A launcher killed while waiting for a round and started again counts twice in that round;
/// it closes the round if it comes back in time (as a late joiner does), and otherwise it does
/// not confirm it (Note [Members confirm]).
///
/// Note [Members confirm]: a launcher may die after taking its ticket and before the round
/// starts (a machine lost during the join window or the last call). Its id is then among the
/// members, and the others' workers would wait for its ranks until their own rendezvous timed
/// out (train_cifar's --timeout, 300 s by default). So each member, once it has read the
/// members, sets "<r>/ready/<id>" and waits until every member has: live launchers poll the
/// store every poll_interval, so they confirm within a fraction of a second; one that has not
/// after confirm_timeout is taken for lost, and the round is closed, so the next one forms
/// without it (or, fewer than MIN left, the job ends in one line). A member only slow to confirm
/// costs a round, and joins the next. A launcher that dies after confirming is left to the
/// workers' timeout, as a failure while they run is.
///
/// Note [Elastic rounds] (--nnodes MIN:MAX, torchrun's spelling): a round starts with whoever
/// joined it in time. Joining takes a ticket, add("<r>/joined", 1), and writes this node's id
/// under it. The round is sealed once MAX have joined, or once MIN have and --rdzv-last-call has
/// passed since (torchrun's last call); the first launcher to see that seals it (an add() decides
/// who) and writes the members: the ids of tickets 1 … joined. Every node takes the members from
/// the store, so all agree, and numbers them densely in id order: group rank, RANK and WORLD_SIZE
/// follow from that. A node whose ticket came after the seal finds the round running without it
/// and closes it, so every node joins the next round with it (scale up, as a relaunched launcher
/// always did; the job resumes from its newest checkpoint). A node lost for good is simply absent
/// from the next round (scale down). Fewer than MIN within --rdzv-timeout ends the job with one
/// line naming the nodes missing. Node 0 stays the one fixed point: its launcher hosts the store.
///
/// Note [Node claims]: each launcher claims its --node-rank once, n = add("tandem-run/node/<id>/
/// claims", 1), writes who it is under "claim/<n>", and from then on bumps "beat/<n>" each time
/// it looks at the store (every poll_interval while it waits, about twice a second while its
/// workers run). A launcher that finds earlier claims watches their beats for lost_after: one that
/// moves belongs to a second launcher given the same --node-rank, and this one is refused in one
/// line naming both (the job goes on with the first); beats that stay still belong to a launcher
/// of this node that died, started again by hand, which goes on, and writes its claim as the id's
/// "holder". The holder's beats let node 0's finish() tell a peer launcher that is lost from one
/// whose workers still run: a member whose beat has not moved for lost_after is reported, in one
/// line, instead of node 0 waiting out --rdzv-timeout in silence.
///
/// Note [Round values] (round_values.h): whatever is read back is parsed whole and checked; a
/// members list must also hold this node if its ticket was sealed in. A value that fails ends the
/// job on every node, in one line naming the key and the store.
///
///   RestartRounds rounds(store, {.nnodes = 2, .node_rank = 1});
///   while (true) {
///     const int attempt = *rounds.join(never);  // every node starts attempt `attempt` together
///     ... run the workers, polling rounds.closed(); a failure calls rounds.close() ...
///   }

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "engine/error.h"
#include "parallel/comm/rendezvous/store.h"
#include "parallel/launch/round_values.h"

namespace tandem::parallel {

struct RestartRoundsOptions {
  int nnodes = 1;     ///< the most nodes a round takes
  int min_nodes = 0;  ///< the fewest a round starts with (Note [Elastic rounds]); 0: nnodes
  int node_rank = 0;  ///< this node's id, 0 … nnodes - 1
  /// Once min_nodes have joined, how long a round waits for more before it starts.
  std::chrono::milliseconds last_call{30000};
  /// How long join() waits for the other nodes, and node 0's finish() for them to finish.
  std::chrono::milliseconds rdzv_timeout{600000};
  /// How long the members of a sealed round wait for each other to confirm (Note [Members
  /// confirm]) before the round is closed as one whose member was lost.
  std::chrono::milliseconds confirm_timeout{5000};
  /// How often join() and finish() look at the store while waiting.
  std::chrono::milliseconds poll_interval{100};
  /// How long a launcher's beat may stand still before it is taken for gone (Note [Node claims]).
  std::chrono::milliseconds lost_after{5000};
  /// The store as errors name it (TcpStore::address()).
  std::string store_name = "the rendezvous store";
  /// Who this launcher is, for the line that names two launchers with one --node-rank;
  /// "" : "pid <pid> on <host>".
  std::string identity{};
};

class RestartRounds {
 public:
  /// `store` reaches node 0's launcher-hosted store (node 0's launcher is a client of its own).
  RestartRounds(std::shared_ptr<Store> store, RestartRoundsOptions options);

  /// Joins the first round not yet running and waits until every node has joined it; returns
  /// its number (the attempt). Returns nothing when `cancelled()` (asked between polls) says
  /// so. Throws "[tandem-run] ..." when the rendezvous timeout passes (naming the nodes that
  /// did not come), when another node ended the job (saying why), or when the store is lost.
  std::optional<int> join(const std::function<bool()>& cancelled);
  /// The round joined last.
  int round() const { return round_; }
  /// The ids of the nodes in the round joined last, ascending; a node's place among them is its
  /// group rank (Note [Elastic rounds]).
  const std::vector<int>& members() const { return members_; }
  /// This node's place in members().
  int group_rank() const;
  /// Whether some node closed the round joined last. One request; throws if the store is lost.
  bool closed();
  /// Closes the round joined last, so every node stops its workers and joins the next.
  void close();
  /// Ends the job on every node: their next join() fails with `reason`. Closes the round.
  void end_job(const std::string& reason);
  /// Records that this node's workers all succeeded. Node 0 hosts the store, so it then waits
  /// until every node has recorded the same (or the round closes) before its launcher exits and
  /// the store with it. Returns a one-line "[tandem-run] ..." when a member did not finish: its
  /// launcher lost (Note [Node claims]) or the rendezvous timeout passed. Never throws.
  std::optional<std::string> finish();

 private:
  std::string key(int round, const std::string& name) const;
  std::string node_key(int node, const std::string& name) const;
  /// Note [Node claims]: claims this node's id, refusing it while another launcher holds it.
  void claim(const std::function<bool()>& cancelled);
  void beat();
  /// The beat count of the launcher holding `node`'s id (-1: none holds it yet).
  int64_t beat_of(int node);
  /// Note [Round values]: the members of `round`, checked as this node, holding `ticket`, reads
  /// them.
  RoundMembers read_members(int round, int64_t ticket);
  int read_ticket_id(int round, int64_t ticket);
  /// Ends the job on every node for a value that failed its check, then rethrows `error`.
  [[noreturn]] void end_for_bad_value(const Error& error);
  /// finish()'s wait at node 0; returns why a member did not finish, if it did not.
  std::optional<std::string> wait_for_members_done();
  /// Waits until every node has joined `round`: true; false when it was closed meanwhile.
  /// The members once the round is sealed with `ticket` among them (sealing it when due); nothing
  /// when it was closed, cancelled, or sealed without this ticket (then closed by this node).
  std::optional<std::vector<int>> wait_for_members(int round, int64_t ticket,
                                                   std::chrono::steady_clock::time_point deadline,
                                                   const std::function<bool()>& cancelled);
  void seal(int round);
  /// Marks the claims of the nodes that the round before had and `ids` has not (lost).
  void mark_dropped(int round, const std::set<int>& ids);
  /// Note [Members confirm]: true once every member has confirmed `round`; false when it was
  /// closed, cancelled, or a member did not confirm in time (then closed by this node).
  bool confirmed_by_all(int round, const std::vector<int>& members,
                        const std::function<bool()>& cancelled);
  void throw_timeout(int round, int64_t joined);
  void close_round(int round);
  void throw_if_ended();
  /// "1, 3": the nodes that have not joined `round`.
  std::string missing_nodes(int round);

  std::shared_ptr<Store> store_;
  RestartRoundsOptions options_;
  int round_ = -1;
  std::vector<int> members_;
  int64_t claim_ = 0;  ///< this launcher's claim on its id, 0 before the first join()
};

}  // namespace tandem::parallel
