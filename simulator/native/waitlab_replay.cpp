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
//   win_create, win_free, win_fence, win_post, win_start, win_complete, win_wait, win_group, win_lock,
//   win_lock_shared, win_unlock, put, get   one-sided MPI (waitlab_replay_rma.cpp)
//   <collective> <args> comm=<w0>,<w1>,...   barrier, bcast, reduce, allreduce, alltoall, allgather, gather,
//                           scatter, scan, exscan on the communicator of those world ranks (waitlab_replay_subcomm.cpp)
//
// Log: one binary record per action, written to the file named by the
// WAITLAB_LOG environment variable: {int32 rank, int32 action_code,
// float64 t_enter, float64 t_exit}, little endian, 24 bytes.  Ranks run one
// at a time inside the single SMPI process (-no-privatize), so records are
// kept in per-rank vectors in memory and written once, rank after rank, when
// the process exits: the reader then needs no sort (24 bytes per action).
#include "waitlab_replay.hpp"
#include "xbt/str.h"

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


// SMPI's point-to-point internals (static members of simgrid::smpi::Request of libsimgrid 3.32, exported but declared
// in no installed header: named by their symbols), called as SimGrid's stock replay actions call them.
extern "C" void smpi_request_ssend(const void* buf, int count, MPI_Datatype type, int dst, int tag, MPI_Comm comm) __asm__(
    "_ZN7simgrid4smpi7Request5ssendEPKviPNS0_8DatatypeEiiPNS0_4CommE");
extern "C" MPI_Request smpi_request_issend(const void* buf, int count, MPI_Datatype type, int dst, int tag,
                                           MPI_Comm comm) __asm__("_ZN7simgrid4smpi7Request6issendEPKviPNS0_8DatatypeEiiPNS0_4CommE");
extern "C" int smpi_request_wait(MPI_Request* req, MPI_Status* status) __asm__(
    "_ZN7simgrid4smpi7Request4waitEPPS1_P10MPI_Status");
extern "C" int smpi_request_waitall(int count, MPI_Request* reqs, MPI_Status* status) __asm__(
    "_ZN7simgrid4smpi7Request7waitallEiPPS1_P10MPI_Status");
extern "C" int smpi_request_test(MPI_Request* req, MPI_Status* status, int* flag) __asm__(
    "_ZN7simgrid4smpi7Request4testEPPS1_P10MPI_StatusPi");

// Nonblocking collectives (posts i<collective>, completions "<collective> ... nbc=<k>"): waitlab_replay_nbc.cpp.
void register_nbc_actions(void (*log)(int32_t code, double t0, double t1));
// The progress file of a long replay (waitlab_progress.cpp).
extern uint64_t waitlab_progress_actions;
void waitlab_progress_tick();
void waitlab_progress_start();

namespace waitlab_replay {

struct Record {
  int32_t rank;
  int32_t code;
  double t_enter;
  double t_exit;
};
static_assert(sizeof(Record) == 24, "log record must be 24 bytes");

// Action codes and names (WL_*, WL_ACTION_NAMES) are generated from waitlab.models.vocabulary.
constexpr int kNumStock = WL_NUM_STOCK;

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

// waitlab's actions never call SMPI's MPI functions: each of them books the host CPU time since the rank's last
// MPI call as simulated computation (smpi_bench_end in SmpiBenchGuard, bursts of at least smpi/cpu-threshold, 1 us
// by default), so a replay would depend on the machine and its load.  They call SMPI's internals, as the stock
// actions do (simgrid::smpi::Request, colls, Win: no benchmarking).

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
// SMPI's Request::issend and kept in waitlab's own store, and wait/waitall/test are wrapped: for every (src, dst, tag) key a
// queue records, in posting order, whether each pending request is a stock one (completed by the stock action)
// or an issend (completed here with Request::wait/waitall/test).
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
  // Synchronous sends: SMPI's Request::ssend / Request::issend (MPI_Ssend / MPI_Issend) on MPI_COMM_WORLD (the stock recv/irecv actions receive on it with
  // the same tag), so the sender waits for the receive at any size.
  xbt_replay_action_register(kActions[WL_SSEND], [](simgrid::xbt::ReplayAction& action) {
    int dst = static_cast<int>(parse_seconds(action, 2));
    int tag = static_cast<int>(parse_seconds(action, 3));
    auto count = static_cast<size_t>(parse_seconds(action, 4));
    std::vector<char> buf(count > 0 ? count : 1);
    double t0 = simgrid::s4u::Engine::get_clock();
    smpi_request_ssend(buf.data(), static_cast<int>(count), MPI_BYTE, dst, tag, MPI_COMM_WORLD);
    log_record(WL_SSEND, t0, simgrid::s4u::Engine::get_clock());
  });
  xbt_replay_action_register(kActions[WL_ISSEND], [](simgrid::xbt::ReplayAction& action) {
    int dst = static_cast<int>(parse_seconds(action, 2));
    int tag = static_cast<int>(parse_seconds(action, 3));
    auto count = static_cast<size_t>(parse_seconds(action, 4));
    Pending p{Pending::kIssend, MPI_REQUEST_NULL, std::vector<char>(count > 0 ? count : 1)};
    double t0 = simgrid::s4u::Engine::get_clock();
    p.req = smpi_request_issend(p.buf.data(), static_cast<int>(count), MPI_BYTE, dst, tag, MPI_COMM_WORLD);
    pending_of_self()[Key(self_rank(), dst, tag)].push_back(std::move(p));
    log_record(WL_ISSEND, t0, simgrid::s4u::Engine::get_clock());
  });
  register_subcomm_collectives(); // collectives whose line names a sub-communicator
  register_rma_actions();         // one-sided communication on windows of MPI_COMM_WORLD
  register_nbc_actions(log_record); // nonblocking collectives (after the collectives' wrappers above)
  static_assert(WL_NUM_ACTIONS == WL_NUM_STOCK + 9 + WL_NUM_RMA + WL_NUM_NBC && WL_FIRST_RMA == WL_NUM_STOCK + 9,
                "the vocabulary has waitlab actions this file does not register (RMA: waitlab_replay_rma.cpp, "
                "nonblocking collectives: waitlab_replay_nbc.cpp)");
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
        smpi_request_wait(&p.req, MPI_STATUS_IGNORE);
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
      smpi_request_waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
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
      smpi_request_test(&it->second.front().req, MPI_STATUS_IGNORE, &flag);
      if (flag)
        it->second.front().kind = Pending::kIssendDone;
    }
    log_record(WL_TEST, t0, simgrid::s4u::Engine::get_clock());
  });
}

} // namespace waitlab_replay

int main(int argc, char* argv[])
{
  using namespace waitlab_replay;
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
