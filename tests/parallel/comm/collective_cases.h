#pragma once
/// The multi-process test bodies every host backend runs (Gloo through tandem-run's launcher, MPI
/// under mpirun): each takes a joined group and checks against values every rank computes on its
/// own, so one body covers a collective on every backend and world size.
///
///   TEST(MpiCollectivesMultiprocess, EveryCollectiveOnThreeRanks) {
///     TANDEM_RUN_UNDER_MPIRUN(3);
///     check_every_collective(*init_process_group("mpi", mpi_environment()));
///   }
///
/// Messages are checked with the group's backend_name() in place of "[gloo]".

#include "parallel/comm/process_group.h"

namespace tandem::parallel::testing {

/// Every collective with every reduce op and dtype, odd lengths and empty tensors, on any world
/// size. Inputs are chosen so that every sum, product and average is exact or rounds the same
/// whatever order the backend combines them in, so the comparisons are exact. A NaN on any one
/// rank comes out of min and max on every rank (Note [NaN in min and max]).
void check_every_collective(ProcessGroup& group);

/// Note [Collective consistency], on 3 ranks: a rank that passes another size, or calls another
/// collective, or alltoall sizes that do not pair up, fail that collective on every rank with
/// the same line; nothing ran, so the group goes on.
void check_consistency_refusals(ProcessGroup& group);

/// new_group() on a world of 4: members renumbered in order, their collectives and the world's
/// interleaved in flight, a sub-group of a sub-group; the ranks outside get a group that refuses
/// use in one line.
void check_subgroups(ProcessGroup& world);

/// Point-to-point on 3 ranks: sends and receives match by (peer, tag), start beside pending
/// collectives, a batch exchanges both ways round the ring, and a receive from any rank says
/// who sent.
void check_tags_and_any_source(ProcessGroup& group);

}  // namespace tandem::parallel::testing
