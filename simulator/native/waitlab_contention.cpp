// waitlab contention plugin: link capacities that depend on who shares the link (SimGrid 3.32 NONLINEAR sharing).
//
// Built as a shared object (simulator/build.py, contention_plugin) that every SMPI run with rules loads with
// LD_PRELOAD into the simulator process alone (smpirun -wrapper "env LD_PRELOAD=..."): waitlab's replays, real programs
// and a program's stock re-run recipe.  When the platform is built (at once when the plugin is loaded after it; else,
// as under LD_PRELOAD, from Engine::on_platform_created) it reads the environment variable
// WAITLAB_CONTENTION (set by the Python side from the "waitlab/contention" setting of the run, see
// waitlab.platforms.contention) and gives every matching link a NONLINEAR sharing policy:
//
//   WAITLAB_CONTENTION = RULE[;RULE...]
//   RULE = hol:PATTERNS:inputs:f1,...,fK  capacity(C, n) = C * f_min(m, K), m = min(input ports, n)   (HOL blocking)
//        | hol:PATTERNS:k:f1,...,fK       capacity(C, n) = C * f_min(ceil(n / k), K)   (flow-count proxy, k >= 1)
//        | mem:PATTERNS:M:w               capacity(C, n) = w * min(n * C, M)            (shared memory path)
//
// w makes up for weight a link carries besides its flows: SMPI's CM02 model puts every flow's cross-traffic
// (weight 0.05, network/crosstraffic) on its reverse route, which for a loopback is the same link.
//
// PATTERNS are shell patterns (fnmatch) of link names separated by '|', e.g. "*_DOWN" (a switch's output port
// to a node in a SimGrid cluster) or "*_loopback" (a node's intra-node link); the first matching rule wins.  n is
// SimGrid's concurrency of the link's constraint: the flows that cross the link forward and have paid their
// latency (src/kernel/lmm/maxmin.cpp, System.cpp: cross-traffic elements and variables still in their latency phase
// do not count).
//
// "inputs" (the exact count): the plugin follows every communication from its start to its end and counts, per
// HOL link, the distinct input ports of the switch that feed it: the link just before it on each communication's
// route (a source node's own link into a leaf switch, or the link from another switch).  SimGrid 3.32 fires
// communication start and end signals only on its kernel communication (simgrid::kernel::activity::CommImpl:
// on_start once the network action exists, on_completion from post()); s4u::Comm::on_start is never fired for
// SMPI's communications in 3.32 and CommImpl's header is not installed, so the class is declared below with just
// the three exported symbols used (two static signals and the out-of-line get_traversed_links(), which is
// route_to(src, dst)); no member data is read.  Counting starts when a communication starts, i.e. during its
// latency phase, while n counts only flows that transfer; m = min(input ports, n) keeps a port from counting more
// inputs than it has transferring flows (exact unless one input's flows transfer while another's wait for their
// latency: docs/calibration.md measures the difference).  Start and end reach the counts before the next solve,
// and they change the link's flow set (a variable is added or freed), so SimGrid re-reads the capacity.
// The callbacks are O(1); the link loop asks SimGrid for the link list once (no per-link host counting).  Unset or
// empty: the plugin does nothing.
#include "simgrid/s4u.hpp"
#include "simgrid/version.h"
#include "xbt/signal.hpp"

#include <algorithm>
#include <fnmatch.h>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

static_assert(SIMGRID_VERSION_MAJOR == 3 && SIMGRID_VERSION_MINOR == 32,
              "waitlab's contention plugin declares SimGrid 3.32's CommImpl symbols: check them against this version");

namespace simgrid::kernel::activity {
// The three symbols of SimGrid 3.32's kernel communication this plugin uses (exported by libsimgrid.so.3.32; the
// class's header, src/kernel/activity/CommImpl.hpp, is not installed).  Layout-free: no member data is declared or
// read, only static signals and an out-of-line member function.
class XBT_PUBLIC CommImpl {
public:
  static xbt::signal<void(CommImpl const&)> on_start;
  static xbt::signal<void(CommImpl const&)> on_completion;
  std::vector<s4u::Link*> get_traversed_links() const;
};
} // namespace simgrid::kernel::activity

namespace {

using simgrid::kernel::activity::CommImpl;
using simgrid::s4u::Link;

struct Rule {
  std::string kind;
  std::vector<std::string> patterns;
  std::shared_ptr<const std::vector<double>> factors; // hol
  int per_input = 0;                                  // hol: 0 = count input ports; k >= 1: ceil(n / k) inputs
  double memory = 0.0;                                // mem
  double scale  = 1.0;                                // mem
};

// A HOL link counted exactly: the communications that cross it, per input port (the link before it on their route;
// nullptr when it is the first link of the route).
struct Port {
  std::unordered_map<const Link*, int> inputs;
};

// Every exactly counted link, and what each started communication added (to take it back at its end).  Function
// statics: apply_rules() may run from this library's constructor, before the file's global objects are built.
std::unordered_map<const Link*, Port*>& ports()
{
  static std::unordered_map<const Link*, Port*> all;
  return all;
}
std::unordered_map<const CommImpl*, std::vector<std::pair<Port*, const Link*>>>& active()
{
  static std::unordered_map<const CommImpl*, std::vector<std::pair<Port*, const Link*>>> all;
  return all;
}

void comm_started(CommImpl const& comm)
{
  std::vector<Link*> route = comm.get_traversed_links();
  std::vector<std::pair<Port*, const Link*>> added;
  for (size_t i = 0; i < route.size(); i++) {
    auto it = ports().find(route[i]);
    if (it == ports().end())
      continue;
    const Link* input = i > 0 ? route[i - 1] : nullptr;
    it->second->inputs[input]++;
    added.emplace_back(it->second, input);
  }
  if (not added.empty())
    active().emplace(&comm, std::move(added));
}

void comm_ended(CommImpl const& comm)
{
  auto it = active().find(&comm);
  if (it == active().end()) // crossed no counted link, or never started
    return;
  for (auto const& [port, input] : it->second) {
    auto in = port->inputs.find(input);
    if (--in->second == 0)
      port->inputs.erase(in);
  }
  active().erase(it);
}

std::vector<std::string> split(const std::string& s, char sep)
{
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos)
      return out;
    start = pos + 1;
  }
}

[[noreturn]] void bad(const std::string& text)
{
  std::fprintf(stderr, "waitlab contention plugin: cannot read WAITLAB_CONTENTION rule '%s'\n", text.c_str());
  std::exit(2);
}

std::vector<Rule> parse(const char* env)
{
  std::vector<Rule> rules;
  for (const std::string& text : split(env, ';')) {
    if (text.empty())
      continue;
    std::vector<std::string> parts = split(text, ':');
    if (parts.size() != 4 || parts[1].empty())
      bad(text);
    Rule r;
    r.kind   = parts[0];
    r.patterns = split(parts[1], '|');
    if (r.kind == "hol") {
      if (parts[2] == "inputs") {
        r.per_input = 0;
      } else {
        r.per_input = std::atoi(parts[2].c_str());
        if (r.per_input < 1)
          bad(text);
      }
      auto values = std::make_shared<std::vector<double>>();
      for (const std::string& v : split(parts[3], ',')) {
        char* end = nullptr;
        double x  = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end != '\0' || !(x > 0.0) || x > 1.0)
          bad(text);
        values->push_back(x);
      }
      r.factors = values;
    } else if (r.kind == "mem") {
      char* end = nullptr;
      r.memory  = std::strtod(parts[2].c_str(), &end);
      if (end == parts[2].c_str() || *end != '\0' || !(r.memory > 0.0))
        bad(text);
      r.scale = std::strtod(parts[3].c_str(), &end);
      if (end == parts[3].c_str() || *end != '\0' || !(r.scale > 0.0))
        bad(text);
    } else {
      bad(text);
    }
    rules.push_back(r);
  }
  return rules;
}

void apply_rules()
{
  const char* env = std::getenv("WAITLAB_CONTENTION");
  if (env == nullptr || *env == '\0')
    return;
  std::vector<Rule> rules = parse(env);
  std::vector<int> applied(rules.size(), 0);
  for (Link* link : simgrid::s4u::Engine::get_instance()->get_all_links()) {
    const std::string& name = link->get_name();
    for (const Rule& r : rules) {
      bool match = false;
      for (const std::string& pat : r.patterns)
        match = match || fnmatch(pat.c_str(), name.c_str(), 0) == 0;
      if (!match)
        continue;
      if (r.kind == "hol" && r.per_input == 0) {
        auto f     = r.factors;
        Port* port = new Port(); // lives as long as the link (the whole simulation)
        ports().emplace(link, port);
        link->set_sharing_policy(Link::SharingPolicy::NONLINEAR, [f, port](double capacity, int n) {
          size_t inputs = std::min(port->inputs.size(), static_cast<size_t>(std::max(n, 0)));
          if (inputs <= 1)
            return capacity;
          return capacity * (*f)[std::min(inputs, f->size()) - 1];
        });
      } else if (r.kind == "hol") {
        auto f = r.factors;
        int per = r.per_input;
        link->set_sharing_policy(Link::SharingPolicy::NONLINEAR, [f, per](double capacity, int n) {
          if (n <= per)
            return capacity;
          size_t inputs = std::min(static_cast<size_t>((n + per - 1) / per), f->size());
          return capacity * (*f)[inputs - 1];
        });
      } else {
        double m = r.memory;
        double w = r.scale;
        link->set_sharing_policy(Link::SharingPolicy::NONLINEAR, [m, w](double capacity, int n) {
          return w * std::min(std::max(n, 1) * capacity, m);
        });
      }
      applied[&r - rules.data()]++;
      break; // first matching rule wins
    }
  }
  if (not ports().empty()) {
    CommImpl::on_start.connect(comm_started);
    CommImpl::on_completion.connect(comm_ended);
  }
  for (size_t i = 0; i < rules.size(); i++)
    std::fprintf(stderr, "waitlab contention: %s law on %d links\n", rules[i].kind.c_str(), applied[i]);
}

// smpirun loads the program after the platform is built (SMPI's smpi_main): then the rules are applied at once;
// loaded before (LD_PRELOAD, or an s4u program), they wait for the platform.
__attribute__((constructor)) void waitlab_contention_init()
{
  if (simgrid::s4u::Engine::is_initialized() && simgrid::s4u::Engine::get_instance()->get_link_count() > 0)
    apply_rules();
  else
    simgrid::s4u::Engine::on_platform_created_cb(apply_rules);
}

} // namespace
