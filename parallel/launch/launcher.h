#pragma once
/// The logic of tandem-run (apps/tandem_run.cpp), torchrun's counterpart: starts the workers of
/// one machine with the rendezvous variables set, prefixes their output with their rank, forwards
/// Ctrl-C, and stops the whole job as soon as one worker fails.
///
///   tandem-run --nproc-per-node 4 -- ./train_cifar --mode ddp
///   # two machines: run on each, with --node-rank 0 and 1
///   tandem-run --nnodes 2 --node-rank 0 --nproc-per-node 4 --master-addr node0 -- ./train ...
///
/// Each worker gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
/// GROUP_RANK (the node), TANDEM_STORE_HOSTED, TORCHELASTIC_RESTART_COUNT (the attempt, the same
/// on every node), unless set, TANDEM_NUM_THREADS = cores / N, and, when the launcher's output
/// is a terminal, TANDEM_TERMINAL_COLUMNS: its width less the rank prefix (a progress bar's room).
///
/// With max_restarts > 0 a failed worker stops the node's workers and every node starts them all
/// again, up to max_restarts times (torchrun's --max-restarts; Note [Restart rounds]). With
/// min_nodes < nnodes (--nnodes MIN:MAX) each attempt runs on the nodes that joined its round,
/// numbered densely (Note [Elastic rounds]):
///
///   tandem-run --nnodes 2:3 --node-rank 1 --nproc-per-node 4 --master-addr node0 --master-port
///     29500 --max-restarts 5 --rdzv-last-call 10 -- ./train_cifar --mode ddp --resume auto ...

#include "parallel/launch/launch_options.h"

namespace tandem::parallel {

/// Runs the workers of this node until they have all exited. Throws tandem::Error ("[tandem-run]
/// ...") for bad options, a command that cannot run, or a busy port, before starting anything.
/// SIGINT and SIGTERM received meanwhile are forwarded to the workers.
LaunchResult launch(const LaunchOptions& options);

}  // namespace tandem::parallel
