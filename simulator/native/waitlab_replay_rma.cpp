// waitlab replay extension: one-sided communication (issue 25).  See waitlab_replay.hpp.
//
// SimGrid 3.32's TI replay has no RMA action.  waitlab writes one-sided calls on windows of MPI_COMM_WORLD as
//   win_create <win> <bytes>        win_free <win>        win_fence <win> [assert]
//   put|get|accumulate <target> <win> <bytes>  win_lock|win_lock_shared|win_unlock <target> <win>
//   win_lock_all <win>   win_unlock_all <win>   win_flush|win_flush_local <target> <win> (target -1: every rank)
//   win_post|win_start <win> <m0>,<m1>,...   win_complete <win>   win_wait <win>   win_group <member> <win>
// (<win>: the k-th window the rank created, the same on every rank; <target>, <m>: world ranks; win_group lines
// repeat the members of the post/start before them, as the measurement layer records them, and take no time).
//
// Each line runs SMPI's own implementation, simgrid::smpi::Win of libsimgrid 3.32 (src/smpi/mpi/smpi_win.cpp), the
// code MPI_Win_fence, MPI_Put, ... run in the program: so the replay has the program run's simulated times.  Not
// through the MPI functions: each of those books the host CPU time since the rank's last MPI call as simulated
// computation (SmpiBenchGuard -> smpi_bench_end -> smpi_execute, for bursts of at least smpi/cpu-threshold), and
// the replay's times then differed run to run (by 1e-11 to 1e-8 s) with the machine's load.  Win's members are
// exported by libsimgrid but declared in no installed header: they are named by their symbols (Itanium C++ ABI,
// `this` first).  Puts and gets move no data (SMPI's replaying flag: the copy callbacks are no-ops): windows are
// made of 1 byte of memory, declared as large as any access.  Window creation: see connect() below.
#include "waitlab_replay.hpp"
#include "xbt/str.h"

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <new>
#include <string>
#include <vector>

// simgrid::smpi::Win (src/smpi/include/smpi_win.hpp of SimGrid 3.32).
extern "C" void smpi_win_construct(void* self, void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm,
                                   bool allocated, bool dynamic) __asm__(
    "_ZN7simgrid4smpi3WinC1EPvliPNS0_4InfoEPNS0_4CommEbb");
extern "C" int smpi_win_del(MPI_Win win) __asm__("_ZN7simgrid4smpi3Win3delEPS1_");
extern "C" int smpi_win_fence(MPI_Win self, int assert_) __asm__("_ZN7simgrid4smpi3Win5fenceEi");
extern "C" int smpi_win_put(MPI_Win self, const void* origin, int origin_count, MPI_Datatype origin_type, int target,
                            MPI_Aint target_disp, int target_count, MPI_Datatype target_type, MPI_Request* request)
    __asm__("_ZN7simgrid4smpi3Win3putEPKviPNS0_8DatatypeEiliS5_PPNS0_7RequestE");
extern "C" int smpi_win_get(MPI_Win self, void* origin, int origin_count, MPI_Datatype origin_type, int target,
                            MPI_Aint target_disp, int target_count, MPI_Datatype target_type, MPI_Request* request)
    __asm__("_ZN7simgrid4smpi3Win3getEPviPNS0_8DatatypeEiliS4_PPNS0_7RequestE");
extern "C" int smpi_win_accumulate(MPI_Win self, const void* origin, int origin_count, MPI_Datatype origin_type,
                                   int target, MPI_Aint target_disp, int target_count, MPI_Datatype target_type,
                                   MPI_Op op, MPI_Request* request)
    __asm__("_ZN7simgrid4smpi3Win10accumulateEPKviPNS0_8DatatypeEiliS5_PNS0_2OpEPPNS0_7RequestE");
extern "C" int smpi_win_lock_all(MPI_Win self, int assert_) __asm__("_ZN7simgrid4smpi3Win8lock_allEi");
extern "C" int smpi_win_unlock_all(MPI_Win self) __asm__("_ZN7simgrid4smpi3Win10unlock_allEv");
extern "C" int smpi_win_flush(MPI_Win self, int rank) __asm__("_ZN7simgrid4smpi3Win5flushEi");
extern "C" int smpi_win_flush_all(MPI_Win self) __asm__("_ZN7simgrid4smpi3Win9flush_allEv");
extern "C" int smpi_win_flush_local(MPI_Win self, int rank) __asm__("_ZN7simgrid4smpi3Win11flush_localEi");
extern "C" int smpi_win_flush_local_all(MPI_Win self) __asm__("_ZN7simgrid4smpi3Win15flush_local_allEv");
extern "C" int smpi_win_lock(MPI_Win self, int lock_type, int rank, int assert_) __asm__("_ZN7simgrid4smpi3Win4lockEiii");
extern "C" int smpi_win_unlock(MPI_Win self, int rank) __asm__("_ZN7simgrid4smpi3Win6unlockEi");
extern "C" int smpi_win_post(MPI_Win self, MPI_Group group, int assert_) __asm__(
    "_ZN7simgrid4smpi3Win4postEPNS0_5GroupEi");
extern "C" int smpi_win_start(MPI_Win self, MPI_Group group, int assert_) __asm__(
    "_ZN7simgrid4smpi3Win5startEPNS0_5GroupEi");
extern "C" int smpi_win_complete(MPI_Win self) __asm__("_ZN7simgrid4smpi3Win8completeEv");
extern "C" int smpi_win_wait(MPI_Win self) __asm__("_ZN7simgrid4smpi3Win4waitEv");

namespace waitlab_replay {
namespace {

constexpr size_t kWinStorage = 4096;             // bytes, above sizeof(simgrid::smpi::Win) of SimGrid 3.32
constexpr MPI_Aint kWinBytes = LONG_MAX / 1024;  // declared window size: no access of a replay is refused

std::deque<std::map<int, MPI_Win>> g_windows; // per rank: window id -> window
char g_window_memory[1];                      // every window's base: a replay copies no data

// Every rank's window of each id, filled before the windows are built: all ranks run in this one process.
std::map<int, std::vector<MPI_Win>> g_by_id;

// Win's constructor exchanges the windows' addresses with an allgather (connected_wins_), whose payload a replay
// does not copy (SMPI's "replaying" flag: the copy callbacks are no-ops).  Turning the flag off around it is not
// safe: a send's buffer handling follows the receiver's flag at the send, the copy callback the flag of the side
// that comes second, and a detached send's user buffer was then freed (heap corruption in SimGrid 3.32).  So the
// allgather runs as in the stock replay (same simulated time: copies take none) and the addresses are written
// here: connected_wins_ is the one std::vector<MPI_Win> inside the Win (libstdc++: begin, end, capacity pointers)
// of the communicator's size whose own entry is the window itself.
void connect(MPI_Win win, int rank, const std::vector<MPI_Win>& all)
{
  auto* words = static_cast<MPI_Win**>(static_cast<void*>(win));
  MPI_Win* found = nullptr;
  for (size_t i = 0; i + 2 < kWinStorage / sizeof(void*); i++) {
    MPI_Win* begin = words[i];
    if (begin == nullptr || words[i + 1] - begin != static_cast<std::ptrdiff_t>(all.size()) ||
        words[i + 2] < words[i + 1] || reinterpret_cast<uintptr_t>(begin) % alignof(MPI_Win) != 0)
      continue;
    if (begin[rank] == win) {
      if (found != nullptr) {
        fprintf(stderr, "waitlab-replay: cannot find the window's peer table (SimGrid is not 3.32?)\n");
        abort();
      }
      found = begin;
    }
  }
  if (found == nullptr) {
    fprintf(stderr, "waitlab-replay: cannot find the window's peer table (SimGrid is not 3.32?)\n");
    abort();
  }
  for (size_t r = 0; r < all.size(); r++)
    found[r] = all[r];
}

std::map<int, MPI_Win>& windows_of_self()
{
  auto rank = static_cast<size_t>(self_rank());
  if (rank >= g_windows.size())
    g_windows.resize(rank + 1);
  return g_windows[rank];
}

MPI_Win window_of(const simgrid::xbt::ReplayAction& action, size_t idx)
{
  int id = static_cast<int>(parse_seconds(action, idx));
  auto& windows = windows_of_self();
  auto it = windows.find(id);
  if (it == windows.end()) {
    fprintf(stderr, "waitlab-replay: rank %d uses window %d before creating it\n", self_rank(), id);
    abort();
  }
  return it->second;
}

void check(int rc, const simgrid::xbt::ReplayAction& action)
{
  if (rc != MPI_SUCCESS) {
    fprintf(stderr, "waitlab-replay: %s of rank %s failed in SMPI (error %d)\n", action[1].c_str(), action[0].c_str(),
            rc);
    abort();
  }
}

// The group of world ranks "<m0>,<m1>,..." (argument idx) for post/start: MPI_Group_incl of MPI_COMM_WORLD's group
// (SMPI's group calls measure no host time).  The window keeps its own reference until complete/wait.
MPI_Group group_of(const simgrid::xbt::ReplayAction& action, size_t idx)
{
  if (action.size() <= idx) {
    fprintf(stderr, "waitlab-replay: %s of rank %s needs its group\n", action[1].c_str(), action[0].c_str());
    abort();
  }
  std::vector<int> members;
  const std::string& list = action[idx] == "-" ? std::string() : action[idx]; // "-": no member
  for (size_t pos = 0; pos < list.size();) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos)
      end = list.size();
    members.push_back(xbt_str_parse_int(list.substr(pos, end - pos).c_str(), "waitlab-replay: bad group member"));
    pos = end + 1;
  }
  MPI_Group world;
  MPI_Group group;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  MPI_Group_incl(world, static_cast<int>(members.size()), members.data(), &group);
  MPI_Group_free(&world);
  return group;
}

template <typename F> void timed(int code, F&& body)
{
  double t0 = simgrid::s4u::Engine::get_clock();
  body();
  log_record(code, t0, simgrid::s4u::Engine::get_clock());
}

} // namespace

void register_rma_actions()
{
  using simgrid::xbt::ReplayAction;
  xbt_replay_action_register(kActions[WL_WIN_CREATE], [](ReplayAction& action) {
    int id = static_cast<int>(parse_seconds(action, 2));
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    auto& all = g_by_id[id];
    all.resize(static_cast<size_t>(n), MPI_WIN_NULL);
    void* storage = ::operator new(kWinStorage);
    std::memset(storage, 0, kWinStorage);
    auto win = static_cast<MPI_Win>(storage);
    all[static_cast<size_t>(self_rank())] = win; // before the allgather, which every rank enters before any leaves
    timed(WL_WIN_CREATE, [&] {
      smpi_win_construct(storage, g_window_memory, kWinBytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, false, false);
    });
    connect(win, self_rank(), all);
    windows_of_self()[id] = win;
  });
  xbt_replay_action_register(kActions[WL_WIN_FREE], [](ReplayAction& action) {
    MPI_Win win = window_of(action, 2);
    timed(WL_WIN_FREE, [&] { check(smpi_win_del(win), action); }); // two barriers; deletes the window
    windows_of_self().erase(static_cast<int>(parse_seconds(action, 2)));
  });
  xbt_replay_action_register(kActions[WL_WIN_FENCE], [](ReplayAction& action) {
    MPI_Win win = window_of(action, 2);
    int assert_ = action.size() > 3 ? static_cast<int>(parse_seconds(action, 3)) : 0;
    timed(WL_WIN_FENCE, [&] { check(smpi_win_fence(win, assert_), action); });
  });
  for (int code : {WL_PUT, WL_GET, WL_ACCUMULATE}) {
    xbt_replay_action_register(kActions[code], [code](ReplayAction& action) {
      int target = static_cast<int>(parse_seconds(action, 2));
      MPI_Win win = window_of(action, 3);
      auto n = static_cast<int>(parse_seconds(action, 4));
      static char origin[1]; // nothing is copied while replaying
      timed(code, [&] {
        if (code == WL_PUT)
          check(smpi_win_put(win, origin, n, MPI_BYTE, target, 0, n, MPI_BYTE, nullptr), action);
        else if (code == WL_ACCUMULATE) // the operation is not applied while replaying
          check(smpi_win_accumulate(win, origin, n, MPI_BYTE, target, 0, n, MPI_BYTE, MPI_BOR, nullptr), action);
        else
          check(smpi_win_get(win, origin, n, MPI_BYTE, target, 0, n, MPI_BYTE, nullptr), action);
      });
    });
  }
  for (int code : {WL_WIN_LOCK, WL_WIN_LOCK_SHARED, WL_WIN_UNLOCK}) {
    xbt_replay_action_register(kActions[code], [code](ReplayAction& action) {
      int target = static_cast<int>(parse_seconds(action, 2));
      MPI_Win win = window_of(action, 3);
      timed(code, [&] {
        if (code == WL_WIN_UNLOCK)
          check(smpi_win_unlock(win, target), action);
        else
          check(smpi_win_lock(win, code == WL_WIN_LOCK ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, target, 0), action);
      });
    });
  }
  for (int code : {WL_WIN_LOCK_ALL, WL_WIN_UNLOCK_ALL}) {
    xbt_replay_action_register(kActions[code], [code](ReplayAction& action) {
      MPI_Win win = window_of(action, 2);
      timed(code, [&] {
        check(code == WL_WIN_LOCK_ALL ? smpi_win_lock_all(win, 0) : smpi_win_unlock_all(win), action);
      });
    });
  }
  for (int code : {WL_WIN_FLUSH, WL_WIN_FLUSH_LOCAL}) { // flush[_local] <target> <win>; target -1: every rank
    xbt_replay_action_register(kActions[code], [code](ReplayAction& action) {
      int target = static_cast<int>(parse_seconds(action, 2));
      MPI_Win win = window_of(action, 3);
      timed(code, [&] {
        if (code == WL_WIN_FLUSH)
          check(target < 0 ? smpi_win_flush_all(win) : smpi_win_flush(win, target), action);
        else
          check(target < 0 ? smpi_win_flush_local_all(win) : smpi_win_flush_local(win, target), action);
      });
    });
  }
  for (int code : {WL_WIN_POST, WL_WIN_START}) {
    xbt_replay_action_register(kActions[code], [code](ReplayAction& action) {
      MPI_Win win = window_of(action, 2);
      MPI_Group group = group_of(action, 3);
      timed(code, [&] {
        check(code == WL_WIN_POST ? smpi_win_post(win, group, 0) : smpi_win_start(win, group, 0), action);
      });
      MPI_Group_free(&group); // the window holds its own reference
    });
  }
  xbt_replay_action_register(kActions[WL_WIN_COMPLETE], [](ReplayAction& action) {
    MPI_Win win = window_of(action, 2);
    timed(WL_WIN_COMPLETE, [&] { check(smpi_win_complete(win), action); });
  });
  xbt_replay_action_register(kActions[WL_WIN_WAIT], [](ReplayAction& action) {
    MPI_Win win = window_of(action, 2);
    timed(WL_WIN_WAIT, [&] { check(smpi_win_wait(win), action); });
  });
  xbt_replay_action_register(kActions[WL_WIN_GROUP], [](ReplayAction&) { // recorded with its post/start: no time
    double t = simgrid::s4u::Engine::get_clock();
    log_record(WL_WIN_GROUP, t, t);
  });
}

} // namespace waitlab_replay
