// What the parts of waitlab's replay extension share (waitlab_replay.cpp: the program, the log and the
// point-to-point actions; waitlab_replay_subcomm.cpp: collectives on sub-communicators; waitlab_replay_rma.cpp:
// one-sided communication).  All ranks run in the one SMPI process (-no-privatize), one at a time.
#ifndef WAITLAB_REPLAY_HPP
#define WAITLAB_REPLAY_HPP

#include "simgrid/s4u.hpp"
#include "smpi/smpi.h"
#include <mpi.h>
#include "xbt/replay.hpp"

#include "waitlab_actions.h"

#include <cstddef>
#include <cstdint>

namespace waitlab_replay {

// Action codes and names (WL_*, WL_ACTION_NAMES) are generated from waitlab.models.vocabulary.
constexpr const char* const* kActions = WL_ACTION_NAMES;

// Append one log record {rank, code, t_enter, t_exit} of the calling rank.
void log_record(int32_t code, double t0, double t1);
// The calling rank (MPI_COMM_WORLD).
int self_rank();
// Argument `idx` of a trace line (0: rank, 1: action name) as a number; aborts naming the action when missing.
double parse_seconds(const simgrid::xbt::ReplayAction& action, size_t idx);

// Wrap the collective actions: a line ending in "comm=..." runs on that communicator (waitlab_replay_subcomm.cpp).
void register_subcomm_collectives();
// Register the one-sided actions (waitlab_replay_rma.cpp).
void register_rma_actions();

} // namespace waitlab_replay

#endif
