// waitlab contention plugin: link capacities that depend on the number of flows (SimGrid 3.32 NONLINEAR sharing).
//
// Linked into waitlab's replay extension (simulator/build.py).  When the platform is built (at once when the
// program is loaded after it, as smpirun does; else from Engine::on_platform_created) it reads the environment variable
// WAITLAB_CONTENTION (set by the Python side from the "waitlab/contention" setting of the run, see
// waitlab.platforms.contention) and gives every matching link a NONLINEAR sharing policy:
//
//   WAITLAB_CONTENTION = RULE[;RULE...]
//   RULE = hol:PATTERNS:k:f1,...,fK    capacity(C, n) = C * f_min(ceil(n / k), K)   (head-of-line blocking law)
//        | mem:PATTERNS:M:w            capacity(C, n) = w * min(n * C, M)     (shared memory path)
//
// w makes up for weight a link carries besides its flows: SMPI's CM02 model puts every flow's cross-traffic
// (weight 0.05, network/crosstraffic) on its reverse route, which for a loopback is the same link.
//
// PATTERNS are shell patterns (fnmatch) of link names separated by '|', e.g. "*_DOWN" (a switch's output port
// to a node in a SimGrid cluster) or "*_loopback" (a node's intra-node link); the first matching rule wins.  n is SimGrid's concurrency of the link's constraint: flows still in
// their latency phase do not count (src/kernel/lmm/maxmin.cpp); ceil(n / k) is the fewest input ports n flows can
// come from when each input carries at most k of them (k = ranks per node).  The callbacks are O(1); the link loop
// asks SimGrid for the link list once (no per-link host counting).  Unset or empty: the plugin does nothing.
#include "simgrid/s4u.hpp"

#include <algorithm>
#include <fnmatch.h>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Rule {
  std::string kind;
  std::vector<std::string> patterns;
  std::shared_ptr<const std::vector<double>> factors; // hol
  int per_input = 1;                                  // hol: flows one input port carries at most
  double memory = 0.0;                                // mem
  double scale  = 1.0;                                // mem
};

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
      r.per_input = std::atoi(parts[2].c_str());
      if (r.per_input < 1)
        bad(text);
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
  for (simgrid::s4u::Link* link : simgrid::s4u::Engine::get_instance()->get_all_links()) {
    const std::string& name = link->get_name();
    for (const Rule& r : rules) {
      bool match = false;
      for (const std::string& pat : r.patterns)
        match = match || fnmatch(pat.c_str(), name.c_str(), 0) == 0;
      if (!match)
        continue;
      if (r.kind == "hol") {
        auto f = r.factors;
        int per = r.per_input;
        link->set_sharing_policy(simgrid::s4u::Link::SharingPolicy::NONLINEAR, [f, per](double capacity, int n) {
          if (n <= per)
            return capacity;
          size_t inputs = std::min(static_cast<size_t>((n + per - 1) / per), f->size());
          return capacity * (*f)[inputs - 1];
        });
      } else {
        double m = r.memory;
        double w = r.scale;
        link->set_sharing_policy(simgrid::s4u::Link::SharingPolicy::NONLINEAR, [m, w](double capacity, int n) {
          return w * std::min(std::max(n, 1) * capacity, m);
        });
      }
      applied[&r - rules.data()]++;
      break; // first matching rule wins
    }
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
