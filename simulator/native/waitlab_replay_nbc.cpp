// waitlab replay extension: nonblocking collectives (issue 25).
//
// A program's MPI_Ialltoall (...) is posted, the program computes, and MPI_Wait completes it: the collective's
// messages travel while the rank computes.  waitlab's event table books the collective at its completion call (as
// its blocking twin, the way Scalasca books it); a capture also keeps the post, so its TI trace has two lines:
//
//   <rank> i<twin> <twin's arguments> nbc=<k>   the post: MPI_I<twin> on MPI_COMM_WORLD, request k of the rank
//   <rank> <twin> <twin's arguments> nbc=<k>    the completion: MPI_Wait on request k (then a reduction's flops)
//
// twin: barrier, bcast, reduce, allreduce, alltoall, allgather, gather, scatter, scan, exscan (the vocabulary's
// NBC_TWINS).  Counts are bytes (waitlab's traces start with "init": default datatype MPI_BYTE); roots are world
// ranks.  MPI_Ibarrier is run as a one-byte MPI_Iallreduce, as the measurement layer runs it (waitlab_pmpi_coll.c:
// SMPI 3.32's Ibarrier can complete before the last rank entered).  The post logs code WL_I<twin>; the completion
// logs the twin's code with the completion call's times, so the replayed event table books the collective where
// the program run booked it.  Sub-communicator nonblocking collectives are written as blocking at their
// completion (no post line), as before.
//
// Registered by register_nbc_actions() from waitlab_replay.cpp, after the collectives' own wrappers: a twin line
// without "nbc=" goes to the action registered before.
#include "simgrid/s4u.hpp"
#include "smpi/smpi.h"
#include <mpi.h>
#include "xbt/replay.hpp"
#include "xbt/str.h"

#include "waitlab_actions.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

using LogFn = void (*)(int32_t code, double t0, double t1);

namespace {

constexpr const char* kNbcArg = "nbc=";

struct Posted {
  MPI_Request req = MPI_REQUEST_NULL;
  std::vector<unsigned char> send, recv; // live until the request completes
  double flops = 0.0;                    // a reduction's flops, executed at its completion (as the stock actions)
};

std::deque<std::map<long, Posted>> g_posted; // per rank: request serial -> posted collective

int self_rank()
{
  return static_cast<int>(simgrid::s4u::this_actor::get_pid() - 1);
}

std::map<long, Posted>& posted_of_self()
{
  auto rank = static_cast<size_t>(self_rank());
  if (rank >= g_posted.size())
    g_posted.resize(rank + 1);
  return g_posted[rank];
}

[[noreturn]] void fail(const simgrid::xbt::ReplayAction& action, const char* what)
{
  fprintf(stderr, "waitlab-replay: rank %s, action '%s': %s\n", action[0].c_str(), action[1].c_str(), what);
  abort();
}

double number(const simgrid::xbt::ReplayAction& action, size_t i)
{
  if (action.size() <= i + 2)
    fail(action, "missing argument");
  return xbt_str_parse_double(action[i + 2].c_str(), "waitlab-replay: bad numeric argument");
}

bool has_nbc(const simgrid::xbt::ReplayAction& action)
{
  return action.size() >= 3 && action.back().compare(0, std::strlen(kNbcArg), kNbcArg) == 0;
}

long serial_of(const simgrid::xbt::ReplayAction& action)
{
  return xbt_str_parse_int(action.back().c_str() + std::strlen(kNbcArg), "waitlab-replay: bad nbc= serial");
}

// SMPI's MPI functions book the host time since the rank's last MPI call as computation: restart the rank's timer
// first, so only the call's own entry is measured (far under smpi/cpu-threshold), as WL_MPI in waitlab_replay.cpp.
#define WL_NBC_MPI(call) (smpi_bench_begin(), call)

// Post the nonblocking form of `twin`; `n` = the number of arguments before "nbc=".
void post(int twin, const simgrid::xbt::ReplayAction& action, size_t n, Posted& p)
{
  int size = 1;
  WL_NBC_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
  auto count = [&](size_t i) { return static_cast<int>(number(action, i)); };
  auto root = [&](size_t i) { return n > i ? count(i) : 0; };
  auto alloc = [](std::vector<unsigned char>& v, size_t k) { v.assign(k > 0 ? k : 1, 0); };
  const MPI_Datatype b = MPI_BYTE;
  const auto world = MPI_COMM_WORLD;
  switch (twin) {
    case WL_BARRIER:
      alloc(p.send, 1);
      alloc(p.recv, 1);
      WL_NBC_MPI(MPI_Iallreduce(p.send.data(), p.recv.data(), 1, MPI_CHAR, MPI_MAX, world, &p.req));
      break;
    case WL_BCAST:
      alloc(p.send, count(0));
      WL_NBC_MPI(MPI_Ibcast(p.send.data(), count(0), b, root(1), world, &p.req));
      break;
    case WL_REDUCE:
      alloc(p.send, count(0));
      alloc(p.recv, count(0));
      p.flops = number(action, 1);
      WL_NBC_MPI(MPI_Ireduce(p.send.data(), p.recv.data(), count(0), b, MPI_BOR, root(2), world, &p.req));
      break;
    case WL_ALLREDUCE:
    case WL_SCAN:
    case WL_EXSCAN:
      alloc(p.send, count(0));
      alloc(p.recv, count(0));
      p.flops = number(action, 1);
      if (twin == WL_ALLREDUCE)
        WL_NBC_MPI(MPI_Iallreduce(p.send.data(), p.recv.data(), count(0), b, MPI_BOR, world, &p.req));
      else if (twin == WL_SCAN)
        WL_NBC_MPI(MPI_Iscan(p.send.data(), p.recv.data(), count(0), b, MPI_BOR, world, &p.req));
      else
        WL_NBC_MPI(MPI_Iexscan(p.send.data(), p.recv.data(), count(0), b, MPI_BOR, world, &p.req));
      break;
    case WL_ALLTOALL:
      alloc(p.send, static_cast<size_t>(count(0)) * size);
      alloc(p.recv, static_cast<size_t>(count(1)) * size);
      WL_NBC_MPI(MPI_Ialltoall(p.send.data(), count(0), b, p.recv.data(), count(1), b, world, &p.req));
      break;
    case WL_ALLGATHER:
      alloc(p.send, count(0));
      alloc(p.recv, static_cast<size_t>(count(1)) * size);
      WL_NBC_MPI(MPI_Iallgather(p.send.data(), count(0), b, p.recv.data(), count(1), b, world, &p.req));
      break;
    case WL_GATHER:
      alloc(p.send, count(0));
      alloc(p.recv, static_cast<size_t>(count(1)) * size);
      WL_NBC_MPI(MPI_Igather(p.send.data(), count(0), b, p.recv.data(), count(1), b, root(2), world, &p.req));
      break;
    case WL_SCATTER:
      alloc(p.send, static_cast<size_t>(count(0)) * size);
      alloc(p.recv, count(1));
      WL_NBC_MPI(MPI_Iscatter(p.send.data(), count(0), b, p.recv.data(), count(1), b, root(2), world, &p.req));
      break;
    default:
      fail(action, "no nonblocking form");
  }
}

} // namespace

// Register the posts (i<twin>) and wrap the twins' actions (a line ending in "nbc=<k>" completes request k).
void register_nbc_actions(LogFn log)
{
  static_assert(WL_NUM_NBC == 10, "one post action per twin below");
  const int twins[WL_NUM_NBC] = {WL_BARRIER, WL_BCAST,     WL_REDUCE, WL_ALLREDUCE, WL_ALLTOALL,
                                 WL_ALLGATHER, WL_GATHER, WL_SCATTER, WL_SCAN,      WL_EXSCAN};
  for (int i = 0; i < WL_NUM_NBC; i++) {
    const int code = WL_FIRST_NBC + i;
    const int twin = twins[i];
    if (std::string(WL_ACTION_NAMES[code]) != std::string("i") + WL_ACTION_NAMES[twin]) {
      fprintf(stderr, "waitlab-replay: action %s is not the post of %s\n", WL_ACTION_NAMES[code],
              WL_ACTION_NAMES[twin]);
      abort();
    }
    xbt_replay_action_register(WL_ACTION_NAMES[code], [code, twin, log](simgrid::xbt::ReplayAction& action) {
      if (!has_nbc(action))
        fail(action, "a nonblocking collective's post needs its request serial (last argument nbc=<k>)");
      double t0 = simgrid::s4u::Engine::get_clock();
      Posted p;
      post(twin, action, action.size() - 3, p);
      auto& posted = posted_of_self();
      if (!posted.emplace(serial_of(action), std::move(p)).second)
        fail(action, "request serial posted twice");
      log(code, t0, simgrid::s4u::Engine::get_clock());
    });
    action_fun before = xbt_replay_action_get(WL_ACTION_NAMES[twin]);
    xbt_replay_action_register(WL_ACTION_NAMES[twin], [before, twin, log](simgrid::xbt::ReplayAction& action) {
      if (!has_nbc(action)) {
        before(action);
        return;
      }
      double t0 = simgrid::s4u::Engine::get_clock();
      auto& posted = posted_of_self();
      auto it = posted.find(serial_of(action));
      if (it == posted.end())
        fail(action, "completes a nonblocking collective that was not posted (no i<collective> line with its nbc=)");
      WL_NBC_MPI(MPI_Wait(&it->second.req, MPI_STATUS_IGNORE));
      double flops = it->second.flops;
      posted.erase(it);
      if (flops > 0)
        smpi_execute_flops(flops);
      log(twin, t0, simgrid::s4u::Engine::get_clock());
    });
  }
}
