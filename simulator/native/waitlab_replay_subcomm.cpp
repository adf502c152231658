// waitlab replay extension: collectives on sub-communicators (issue 25).  See waitlab_replay.hpp.
#include "waitlab_replay.hpp"
#include "xbt/str.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
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

namespace waitlab_replay {
namespace {

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
  MPI_Comm_group(MPI_COMM_WORLD, &world); // SMPI's group calls measure no host time
  MPI_Group_incl(world, static_cast<int>(members.size()), members.data(), &group);
  MPI_Group_free(&world);
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
} // namespace

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

} // namespace waitlab_replay
