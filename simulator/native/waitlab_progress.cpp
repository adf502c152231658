// Progress of a long replay, for waitlab's terminal line (issue 23; simulator/progress.py reads it).
//
// When the WAITLAB_PROGRESS environment variable names a file, the simulated time reached and the number of
// actions replayed so far are written there at most once per WAITLAB_PROGRESS_INTERVAL seconds of wall time
// (default 1): one line "<simulated seconds> <actions>", padded to 64 bytes and rewritten in place at offset 0,
// so the reader always finds the latest one.  The clock is checked when SimGrid advances its simulated clock
// (s4u::Engine::on_time_advance) and after every replayed action.  Reading the wall clock and writing the file
// take no simulated time and change no SimGrid state: a run gives the same results with and without it.  Without
// WAITLAB_PROGRESS nothing is registered and every tick returns at once.
#include "simgrid/s4u.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

// smpicxx maps clock_gettime to SMPI's simulated clock (smpi/smpi_helpers.h); the wall clock is wanted here.
#undef clock_gettime

uint64_t waitlab_progress_actions = 0; // incremented by the replay for every logged action

namespace {
int g_fd = -1;
double g_interval = 1.0;
double g_next = 0.0;

double wall_seconds()
{
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
} // namespace

void waitlab_progress_tick()
{
  if (g_fd < 0)
    return;
  double now = wall_seconds();
  if (now < g_next)
    return;
  g_next = now + g_interval;
  char line[64];
  std::memset(line, ' ', sizeof line);
  int n = snprintf(line, sizeof line, "%.9f %llu", simgrid::s4u::Engine::get_clock(),
                   static_cast<unsigned long long>(waitlab_progress_actions));
  if (n > 0 && n < static_cast<int>(sizeof line))
    line[n] = ' ';
  line[sizeof line - 1] = '\n';
  if (pwrite(g_fd, line, sizeof line, 0) < 0) { // a progress file that cannot be written: no more progress
    close(g_fd);
    g_fd = -1;
  }
}

void waitlab_progress_start()
{
  static bool started = false;
  if (started)
    return;
  started = true;
  const char* path = std::getenv("WAITLAB_PROGRESS");
  if (path == nullptr || *path == '\0')
    return;
  if (const char* every = std::getenv("WAITLAB_PROGRESS_INTERVAL")) {
    double v = std::strtod(every, nullptr);
    if (v > 0)
      g_interval = v;
  }
  g_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (g_fd < 0)
    return;
  g_next = wall_seconds() + g_interval;
  simgrid::s4u::Engine::on_time_advance_cb([](double) { waitlab_progress_tick(); });
}
