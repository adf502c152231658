// waitlab replay extension for SimGrid SMPI time-independent (TI) traces.
//
// Keeps every stock TI action, adds waitlab's own actions and logs the
// simulated enter/exit time of every action of every rank.
//
// Extra actions (one per trace line, "<rank> <action> <args>"):
//   enter <region>          zero-duration region entry marker
//   leave <region>          zero-duration region exit marker
//   overhead <seconds>      CPU-bound instrumentation cost (execute seconds * host speed)
//   noise <seconds>         CPU-bound system-noise detour
//   delay <seconds>         non-CPU-bound delay (sleep_for)
//   flush <bytes> <bytes_per_s> [latency_s]   trace-buffer flush to disk (sleep_for)
//   swap <seconds>          trace-buffer swap penalty (sleep_for: the rank is stalled on paging I/O)
//   ssend <dst> <tag> <bytes>    MPI_Ssend (waits for the receive at any size)
//   issend <dst> <tag> <bytes>   MPI_Issend, completed by the next wait/waitall/test of its (src, dst, tag)
//   <collective> <args> comm=<w0>,<w1>,...   barrier, bcast, reduce, allreduce, alltoall, allgather, gather,
//                           scatter, scan, exscan on the communicator of those world ranks (register_subcomm_collectives)
//
// Log: one binary record per action, written to the file named by the
// WAITLAB_LOG environment variable: {int32 rank, int32 action_code,
// float64 t_enter, float64 t_exit}, little endian, 24 bytes.  Ranks run one
// at a time inside the single SMPI process (-no-privatize), so records are
// kept in per-rank vectors in memory and written once, rank after rank, when
// the process exits: the reader then needs no sort (24 bytes per action).
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
#include <memory>
#include <tuple>
#include <unistd.h>
#include <string>
#include <vector>

// simgrid::smpi::Comm::Comm(Group*, std::shared_ptr<Topo>, bool smp, int id) of libsimgrid 3.32 (see below).
extern "C" void smpi_comm_construct(void* self, MPI_Group group, std::shared_ptr<simgrid::smpi::Topo>* topo, bool smp,
                                    int id) __asm__("_ZN7simgrid4smpi4CommC1EPNS0_5GroupESt10shared_ptrINS0_4TopoEEbi");

// SMPI's collective implementations, as its stock replay actions call them (function pointers set by the
// collective selector; scan and exscan are functions): src/smpi/include/smpi_coll.hpp of SimGrid 3.32.
extern int (*smpi_coll_barrier)(MPI_Comm) __asm__("_ZN7simgrid4smpi5colls7barrierE");
extern int (*smpi_coll_bcast)(void*, int, MPI_Datatype, int, MPI_Comm) __asm__("_ZN7simgrid4smpi5colls5bcastE");
extern int (*smpi_coll_reduce)(const void*, void*, int, MPI_Datatype, MPI_Op, int, MPI_Comm) __asm__(
    "_ZN7simgrid4smpi5colls6reduceE");
extern int (*smpi_coll_allreduce)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm) __asm__(
    "_ZN7simgrid4smpi5colls9allreduceE");
extern int (*smpi_coll_alltoall)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm) __asm__(
    "_ZN7simgrid4smpi5colls8alltoallE");
extern int (*smpi_coll_allgather)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm) __asm__(
    "_ZN7simgrid4smpi5colls9allgatherE");
extern int (*smpi_coll_gather)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, int, MPI_Comm) __asm__(
    "_ZN7simgrid4smpi5colls6gatherE");
extern int (*smpi_coll_scatter)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, int, MPI_Comm) __asm__(
    "_ZN7simgrid4smpi5colls7scatterE");
extern "C" int smpi_coll_scan(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm) __asm__(
    "_ZN7simgrid4smpi5colls4scanEPKvPviPNS0_8DatatypeEPNS0_2OpEPNS0_4CommE");
extern "C" int smpi_coll_exscan(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm) __asm__(
    "_ZN7simgrid4smpi5colls6exscanEPKvPviPNS0_8DatatypeEPNS0_2OpEPNS0_4CommE");

// The progress file of a long replay (waitlab_progress.cpp).
extern uint64_t waitlab_progress_actions;
void waitlab_progress_tick();
void waitlab_progress_start();

namespace {

struct Record {
  int32_t rank;
  int32_t code;
  double t_enter;
  double t_exit;
};
static_assert(sizeof(Record) == 24, "log record must be 24 bytes");

// Action codes and names (WL_*, WL_ACTION_NAMES) are generated from waitlab.models.vocabulary.
constexpr int kNumStock = WL_NUM_STOCK;
const char* const* const kActions = WL_ACTION_NAMES;

FILE* g_log = nullptr;
bool g_registered = false;
std::vector<std::vector<Record>> g_records; // per rank, in action order

void log_record(int32_t code, double t0, double t1)
{
  auto rank = static_cast<int32_t>(simgrid::s4u::this_actor::get_pid() - 1);
  if (static_cast<size_t>(rank) >= g_records.size())
    g_records.resize(rank + 1);
  g_records[rank].push_back(Record{rank, code, t0, t1});
  ++waitlab_progress_actions;
  waitlab_progress_tick();
}

// SMPI's MPI functions book the host CPU time since the rank's last MPI call as simulated computation
// (smpi_bench_end at their entry; bursts under smpi/cpu-threshold, 1 us by default, are dropped).  The stock
// actions call SMPI's internals; the group calls that make a sub-communicator restart the rank's timer first, so
// only the call's own entry is measured, far under the threshold (the sub-communicator replay gives the same
// bytes run after run).  The ssend/issend actions still call MPI functions directly: their replays differ run to
// run in the last digits (as before this change).
#define WL_MPI(call) (smpi_bench_begin(), call)

void write_log()
{
  for (auto const& records : g_records)
    if (!records.empty() && fwrite(records.data(), sizeof(Record), records.size(), g_log) != records.size()) {
      fprintf(stderr, "waitlab-replay: cannot write the event log: %s\n", strerror(errno));
      _exit(1);
    }
  if (fclose(g_log) != 0) {
    fprintf(stderr, "waitlab-replay: cannot write the event log: %s\n", strerror(errno));
    _exit(1);
  }
}

// Nonblocking synchronous sends.  SimGrid 3.32 keeps the requests of the stock isend/irecv actions in a file-static
// store of smpi_replay.cpp (keyed by sender, receiver and tag, first in first out), which no other code can reach,
// and its wait/waitall/test actions only complete requests found there.  So an issend is started here with
// MPI_Issend and kept in waitlab's own store, and wait/waitall/test are wrapped: for every (src, dst, tag) key a
// queue records, in posting order, whether each pending request is a stock one (completed by the stock action)
// or an issend (completed here with MPI_Wait/MPI_Waitall/MPI_Test).
struct Pending {
  enum Kind { kStock, kIssend, kIssendDone } kind;
  MPI_Request req;
  std::vector<char> buf; // the send buffer must live until the request completes
};
using Key = std::tuple<int, int, int>; // sender, receiver (world ranks), tag
std::deque<std::map<Key, std::deque<Pending>>> g_pending; // per rank (a deque: growing it moves no rank's map)

std::map<Key, std::deque<Pending>>& pending_of_self()
{
  auto rank = static_cast<size_t>(simgrid::s4u::this_actor::get_pid() - 1);
  if (rank >= g_pending.size())
    g_pending.resize(rank + 1);
  return g_pending[rank];
}

int self_rank()
{
  return static_cast<int>(simgrid::s4u::this_actor::get_pid() - 1);
}

// The queue of the (src, dst, tag) a wait/test action names (its arguments 2-4), or end() when none.
std::map<Key, std::deque<Pending>>::iterator pending_of_action(std::map<Key, std::deque<Pending>>& pending,
                                                              const simgrid::xbt::ReplayAction& action);

double parse_seconds(const simgrid::xbt::ReplayAction& action, size_t idx)
{
  if (action.size() <= idx) {
    fprintf(stderr, "waitlab-replay: action '%s' of rank %s needs %zu argument(s)\n", action[1].c_str(),
            action[0].c_str(), idx - 1);
    abort();
  }
  return xbt_str_parse_double(action[idx].c_str(), "waitlab-replay: bad numeric argument");
}

std::map<Key, std::deque<Pending>>::iterator pending_of_action(std::map<Key, std::deque<Pending>>& pending,
                                                              const simgrid::xbt::ReplayAction& action)
{
  if (action.size() <= 4)
    return pending.end();
  return pending.find(Key(static_cast<int>(parse_seconds(action, 2)), static_cast<int>(parse_seconds(action, 3)),
                          static_cast<int>(parse_seconds(action, 4))));
}

// ---- Collectives on sub-communicators (issue 25) --------------------------------------------------------------
// SimGrid 3.32's stock collective actions run on MPI_COMM_WORLD.  waitlab writes a collective on another
// communicator with one more, last argument "comm=<w0>,<w1>,..." (its members' MPI_COMM_WORLD ranks in
// communicator-rank order; roots stay world ranks).  Such a line is run here with the MPI call itself on that
// communicator, built on first use with MPI_Comm_create from MPI_COMM_WORLD's group (members only: its first use
// is collective over them); a line without that argument goes to the stock action unchanged.  Counts are bytes
// (the writer's traces start with "init", default datatype MPI_BYTE); reductions then execute their flops
// argument, as the stock reduce/allreduce/scan actions do.
//
// The communicator is made without any simulated communication: SimGrid's MPI_Comm_create/MPI_Comm_split agree on
// a communicator id with a broadcast, whose payload a replay does not copy (the members got different ids and
// deadlocked), and the program run's own MPI_Comm_split/MPI_Comm_dup time is already in the captured compute.
// So the constructor simgrid::smpi::Comm(group, topology, smp, id) of libsimgrid 3.32 is called with an id chosen
// here (above any id SimGrid gives, one per member list); it is exported but declared in no installed header, so it
// is named by its symbol.  Its shared_ptr argument is passed by address (Itanium C++ ABI: a non-trivial argument
// goes by invisible reference, destroyed by the caller).
std::deque<std::map<std::string, MPI_Comm>> g_subcomms; // per rank: member list -> communicator
constexpr int kFirstSubcommId = 1 << 24;
constexpr size_t kCommStorage = 4096; // bytes, above sizeof(simgrid::smpi::Comm) of SimGrid 3.32

constexpr const char* kCommArg = "comm=";

MPI_Comm subcomm_of(const std::string& arg, std::vector<int>& members)
{
  auto rank = static_cast<size_t>(self_rank());
  if (rank >= g_subcomms.size())
    g_subcomms.resize(rank + 1);
  std::string list = arg.substr(std::strlen(kCommArg));
  members.clear();
  for (size_t pos = 0; pos < list.size();) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos)
      end = list.size();
    members.push_back(xbt_str_parse_int(list.substr(pos, end - pos).c_str(), "waitlab-replay: bad comm= member"));
    pos = end + 1;
  }
  auto found = g_subcomms[rank].find(list);
  if (found != g_subcomms[rank].end())
    return found->second;
  bool member = false;
  for (int m : members)
    member = member || m == self_rank();
  if (!member) {
    fprintf(stderr, "waitlab-replay: rank %d runs a collective on communicator '%s' it is not a member of\n",
            self_rank(), list.c_str());
    abort();
  }
  // One id per member list, the same for every member: all ranks run in this one process (-no-privatize).
  static std::map<std::string, int> ids;
  int id = ids.emplace(list, kFirstSubcommId + static_cast<int>(ids.size())).first->second;
  MPI_Group world, group;
  WL_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
  WL_MPI(MPI_Group_incl(world, static_cast<int>(members.size()), members.data(), &group));
  WL_MPI(MPI_Group_free(&world));
  // The group stays referenced by the communicator (never freed: it lives until the replay ends).
  void* storage = std::calloc(1, kCommStorage);
  std::shared_ptr<simgrid::smpi::Topo> no_topology;
  smpi_comm_construct(storage, group, &no_topology, false, id);
  auto comm = static_cast<MPI_Comm>(storage);
  g_subcomms[rank][list] = comm;
  return comm;
}

// The communicator rank of world rank `world_rank` among `members`.
int local_rank(const std::vector<int>& members, int world_rank)
{
  for (size_t i = 0; i < members.size(); i++)
    if (members[i] == world_rank)
      return static_cast<int>(i);
  fprintf(stderr, "waitlab-replay: root %d is not a member of its communicator\n", world_rank);
  abort();
}

// Run one collective line that names a communicator (arguments as the stock action, without "comm=").
void run_subcomm_collective(int code, const simgrid::xbt::ReplayAction& action, MPI_Comm comm,
                            const std::vector<int>& members)
{
  auto n = static_cast<size_t>(members.size());
  auto arg = [&action](size_t i) { return parse_seconds(action, i + 2); }; // i-th argument after the name
  auto count = [&arg](size_t i) { return static_cast<int>(arg(i)); };
  auto root = [&](size_t i) { return local_rank(members, action.size() > i + 2 ? count(i) : members[0]); };
  auto bytes = [](size_t k) { return std::vector<unsigned char>(k > 0 ? k : 1); };
  const MPI_Datatype b = MPI_BYTE;
  // SMPI's implementations, called as the stock actions call them (MPI_OP_NULL: a replay reduces no data), not
  // through the MPI functions, which would book the host time since the rank's last MPI call as computation.
  if (code == WL_BARRIER) {
    smpi_coll_barrier(comm);
  } else if (code == WL_BCAST) {
    auto buf = bytes(count(0));
    smpi_coll_bcast(buf.data(), count(0), b, root(1), comm);
  } else if (code == WL_REDUCE) {
    auto s = bytes(count(0)), r = bytes(count(0));
    smpi_coll_reduce(s.data(), r.data(), count(0), b, MPI_OP_NULL, root(2), comm);
    smpi_execute_flops(arg(1));
  } else if (code == WL_ALLREDUCE || code == WL_SCAN || code == WL_EXSCAN) {
    auto s = bytes(count(0)), r = bytes(count(0));
    if (code == WL_ALLREDUCE)
      smpi_coll_allreduce(s.data(), r.data(), count(0), b, MPI_OP_NULL, comm);
    else if (code == WL_SCAN)
      smpi_coll_scan(s.data(), r.data(), count(0), b, MPI_OP_NULL, comm);
    else
      smpi_coll_exscan(s.data(), r.data(), count(0), b, MPI_OP_NULL, comm);
    smpi_execute_flops(arg(1));
  } else if (code == WL_ALLTOALL || code == WL_ALLGATHER) {
    auto s = bytes(count(0) * (code == WL_ALLTOALL ? n : 1)), r = bytes(count(1) * n);
    if (code == WL_ALLTOALL)
      smpi_coll_alltoall(s.data(), count(0), b, r.data(), count(1), b, comm);
    else
      smpi_coll_allgather(s.data(), count(0), b, r.data(), count(1), b, comm);
  } else if (code == WL_GATHER) {
    auto s = bytes(count(0)), r = bytes(count(1) * n);
    smpi_coll_gather(s.data(), count(0), b, r.data(), count(1), b, root(2), comm);
  } else if (code == WL_SCATTER) {
    auto s = bytes(count(0) * n), r = bytes(count(1));
    smpi_coll_scatter(s.data(), count(0), b, r.data(), count(1), b, root(2), comm);
  } else {
    fprintf(stderr, "waitlab-replay: %s on a sub-communicator cannot be replayed\n", action[1].c_str());
    abort();
  }
}

// Wrap the (already logged) collective actions: a line ending in "comm=..." runs on that communicator.
void register_subcomm_collectives()
{
  for (int code : {WL_BARRIER, WL_BCAST, WL_REDUCE, WL_ALLREDUCE, WL_ALLTOALL, WL_GATHER, WL_SCATTER, WL_ALLGATHER,
                   WL_SCAN, WL_EXSCAN}) {
    action_fun world = xbt_replay_action_get(kActions[code]);
    xbt_replay_action_register(kActions[code], [world, code](simgrid::xbt::ReplayAction& action) {
      if (action.size() < 3 || action.back().compare(0, std::strlen(kCommArg), kCommArg) != 0) {
        world(action);
        return;
      }
      simgrid::xbt::ReplayAction rest(action.begin(), action.end() - 1);
      std::vector<int> members;
      MPI_Comm comm = subcomm_of(action.back(), members);
      double t0 = simgrid::s4u::Engine::get_clock();
      run_subcomm_collective(code, rest, comm, members);
      log_record(code, t0, simgrid::s4u::Engine::get_clock());
    });
  }
}

void register_actions()
{
  // The action table is process-global: register the wrappers exactly once.
  if (g_registered)
    return;
  g_registered = true;
  // the stock point-to-point actions, before they are wrapped
  action_fun stock_isend = xbt_replay_action_get("isend");
  action_fun stock_irecv = xbt_replay_action_get("irecv");
  action_fun stock_wait = xbt_replay_action_get("wait");
  action_fun stock_waitall = xbt_replay_action_get("waitall");
  action_fun stock_test = xbt_replay_action_get("test");
  for (int code = 0; code < kNumStock; code++) {
    action_fun stock = xbt_replay_action_get(kActions[code]);
    if (!stock) {
      fprintf(stderr, "waitlab-replay: SimGrid has no stock TI action '%s'\n", kActions[code]);
      abort();
    }
    xbt_replay_action_register(kActions[code], [stock, code](simgrid::xbt::ReplayAction& action) {
      double t0 = simgrid::s4u::Engine::get_clock();
      stock(action);
      log_record(code, t0, simgrid::s4u::Engine::get_clock());
    });
  }
  auto marker = [](int code) {
    return [code](simgrid::xbt::ReplayAction&) {
      double t = simgrid::s4u::Engine::get_clock();
      log_record(code, t, t);
    };
  };
  auto cpu_bound = [](int code) {
    return [code](simgrid::xbt::ReplayAction& action) {
      double seconds = parse_seconds(action, 2);
      double t0 = simgrid::s4u::Engine::get_clock();
      if (seconds > 0)
        simgrid::s4u::this_actor::execute(seconds * simgrid::s4u::this_actor::get_host()->get_speed());
      log_record(code, t0, simgrid::s4u::Engine::get_clock());
    };
  };
  auto sleeping = [](int code) {
    return [code](simgrid::xbt::ReplayAction& action) {
      double seconds = parse_seconds(action, 2);
      double t0 = simgrid::s4u::Engine::get_clock();
      if (seconds > 0)
        simgrid::s4u::this_actor::sleep_for(seconds);
      log_record(code, t0, simgrid::s4u::Engine::get_clock());
    };
  };
  xbt_replay_action_register(kActions[WL_ENTER], marker(WL_ENTER));
  xbt_replay_action_register(kActions[WL_LEAVE], marker(WL_LEAVE));
  xbt_replay_action_register(kActions[WL_OVERHEAD], cpu_bound(WL_OVERHEAD));
  xbt_replay_action_register(kActions[WL_NOISE], cpu_bound(WL_NOISE));
  xbt_replay_action_register(kActions[WL_DELAY], sleeping(WL_DELAY));
  xbt_replay_action_register(kActions[WL_FLUSH], [](simgrid::xbt::ReplayAction& action) {
    double bytes = parse_seconds(action, 2);
    double rate = parse_seconds(action, 3);
    double latency = action.size() > 4 ? parse_seconds(action, 4) : 0.0;
    if (rate <= 0) {
      fprintf(stderr, "waitlab-replay: flush rate must be > 0 (rank %s)\n", action[0].c_str());
      abort();
    }
    double t0 = simgrid::s4u::Engine::get_clock();
    double seconds = latency + bytes / rate;
    if (seconds > 0)
      simgrid::s4u::this_actor::sleep_for(seconds);
    log_record(WL_FLUSH, t0, simgrid::s4u::Engine::get_clock());
  });
  xbt_replay_action_register(kActions[WL_SWAP], sleeping(WL_SWAP));
  // Synchronous sends: MPI_Ssend / MPI_Issend on MPI_COMM_WORLD (the stock recv/irecv actions receive on it with
  // the same tag), so the sender waits for the receive at any size.
  xbt_replay_action_register(kActions[WL_SSEND], [](simgrid::xbt::ReplayAction& action) {
    int dst = static_cast<int>(parse_seconds(action, 2));
    int tag = static_cast<int>(parse_seconds(action, 3));
    auto count = static_cast<size_t>(parse_seconds(action, 4));
    std::vector<char> buf(count > 0 ? count : 1);
    double t0 = simgrid::s4u::Engine::get_clock();
    MPI_Ssend(buf.data(), static_cast<int>(count), MPI_BYTE, dst, tag, MPI_COMM_WORLD);
    log_record(WL_SSEND, t0, simgrid::s4u::Engine::get_clock());
  });
  xbt_replay_action_register(kActions[WL_ISSEND], [](simgrid::xbt::ReplayAction& action) {
    int dst = static_cast<int>(parse_seconds(action, 2));
    int tag = static_cast<int>(parse_seconds(action, 3));
    auto count = static_cast<size_t>(parse_seconds(action, 4));
    Pending p{Pending::kIssend, MPI_REQUEST_NULL, std::vector<char>(count > 0 ? count : 1)};
    double t0 = simgrid::s4u::Engine::get_clock();
    MPI_Issend(p.buf.data(), static_cast<int>(count), MPI_BYTE, dst, tag, MPI_COMM_WORLD, &p.req);
    pending_of_self()[Key(self_rank(), dst, tag)].push_back(std::move(p));
    log_record(WL_ISSEND, t0, simgrid::s4u::Engine::get_clock());
  });
  register_subcomm_collectives(); // collectives whose line names a sub-communicator
  static_assert(WL_NUM_ACTIONS == WL_NUM_STOCK + 9 + WL_NUM_RMA && WL_FIRST_RMA == WL_NUM_STOCK + 9,
                "the vocabulary has waitlab actions this file does not register (RMA actions have no TI form)");
  // The request bookkeeping below costs a map operation per isend/irecv/wait: only traces with an issend need it
  // (waitlab sets WAITLAB_ISSEND for them), so the others replay with the stock actions unchanged.
  if (std::getenv("WAITLAB_ISSEND") == nullptr)
    return;
  // Stock isend/irecv: queue a stock marker under their key (partner and tag are the first two arguments).
  auto stock_posting = [](action_fun stock, int code, bool is_send) {
    return [stock, code, is_send](simgrid::xbt::ReplayAction& action) {
      double t0 = simgrid::s4u::Engine::get_clock();
      stock(action);
      if (action.size() > 3) {
        int partner = static_cast<int>(parse_seconds(action, 2));
        int tag = static_cast<int>(parse_seconds(action, 3));
        Key key = is_send ? Key(self_rank(), partner, tag) : Key(partner, self_rank(), tag);
        pending_of_self()[key].push_back(Pending{Pending::kStock, MPI_REQUEST_NULL, {}});
      }
      log_record(code, t0, simgrid::s4u::Engine::get_clock());
    };
  };
  xbt_replay_action_register(kActions[WL_ISEND], stock_posting(stock_isend, WL_ISEND, true));
  xbt_replay_action_register(kActions[WL_IRECV], stock_posting(stock_irecv, WL_IRECV, false));
  // wait <src> <dst> <tag>: the oldest pending request of that key; an issend's is completed here.
  xbt_replay_action_register(kActions[WL_WAIT], [stock_wait](simgrid::xbt::ReplayAction& action) {
    double t0 = simgrid::s4u::Engine::get_clock();
    auto& pending = pending_of_self();
    auto it = pending_of_action(pending, action);
    if (it == pending.end() || it->second.front().kind == Pending::kStock) {
      if (it != pending.end()) {
        it->second.pop_front();
        if (it->second.empty())
          pending.erase(it);
      }
      stock_wait(action);
    } else {
      Pending p = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty())
        pending.erase(it);
      if (p.kind == Pending::kIssend)
        MPI_Wait(&p.req, MPI_STATUS_IGNORE);
    }
    log_record(WL_WAIT, t0, simgrid::s4u::Engine::get_clock());
  });
  // waitall: every pending issend of the rank, then the stock waitall (every stock request).
  xbt_replay_action_register(kActions[WL_WAITALL], [stock_waitall](simgrid::xbt::ReplayAction& action) {
    double t0 = simgrid::s4u::Engine::get_clock();
    auto& pending = pending_of_self();
    std::vector<MPI_Request> reqs;
    for (auto& [key, queue] : pending)
      for (auto& p : queue)
        if (p.kind == Pending::kIssend)
          reqs.push_back(p.req);
    if (!reqs.empty())
      MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
    pending_of_self().clear();
    stock_waitall(action);
    log_record(WL_WAITALL, t0, simgrid::s4u::Engine::get_clock());
  });
  // test <src> <dst> <tag>: an issend's request is tested here (it stays queued, done or not, for its wait).
  xbt_replay_action_register(kActions[WL_TEST], [stock_test](simgrid::xbt::ReplayAction& action) {
    double t0 = simgrid::s4u::Engine::get_clock();
    auto& pending = pending_of_self();
    auto it = pending_of_action(pending, action);
    if (it == pending.end() || it->second.front().kind == Pending::kStock) {
      stock_test(action);
    } else if (it->second.front().kind == Pending::kIssend) {
      int flag = 0;
      MPI_Test(&it->second.front().req, &flag, MPI_STATUS_IGNORE);
      if (flag)
        it->second.front().kind = Pending::kIssendDone;
    }
    log_record(WL_TEST, t0, simgrid::s4u::Engine::get_clock());
  });
}

} // namespace

int main(int argc, char* argv[])
{
  auto* self = simgrid::s4u::Actor::self();
  if (self == nullptr || self->get_property("smpi_replay") == nullptr) {
    fprintf(stderr, "waitlab-replay must be started by 'smpirun -replay INDEX waitlab-replay'\n");
    return 1;
  }
  const char* instance_id = self->get_property("instance_id");
  const int rank = xbt_str_parse_int(self->get_property("rank"), "waitlab-replay: cannot parse rank");
  const char* trace_filename = argc > 1 ? argv[1] : nullptr;
  // A one-line index names one trace shared by all ranks: smpirun gives it to rank 0 as the
  // "tracefile" property (no file is opened per rank), as SimGrid's smpireplaymain does.
  const char* shared_trace = self->get_property("tracefile");

  if (g_log == nullptr) {
    const char* path = getenv("WAITLAB_LOG");
    if (path == nullptr || *path == '\0') {
      fprintf(stderr, "waitlab-replay: set WAITLAB_LOG to the path of the event log\n");
      return 1;
    }
    g_log = fopen(path, "wb");
    if (g_log == nullptr) {
      fprintf(stderr, "waitlab-replay: cannot open event log %s: %s\n", path, strerror(errno));
      return 1;
    }
    setvbuf(g_log, nullptr, _IOFBF, 1 << 22);
    std::atexit(write_log); // after the simulation: every rank's records, in rank order
    waitlab_progress_start();
  }

  smpi_replay_init(instance_id, rank, 0.0);
  register_actions();
  if (shared_trace != nullptr)
    xbt_replay_set_tracefile(shared_trace);
  smpi_replay_main(rank, trace_filename);
  return 0;
}
