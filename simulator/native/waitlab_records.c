/* The measurement layer's records -> the operation table, in one pass (issue 25: waitlab's own work around a
 * program run).  Used by simulator/program_records.py through ctypes; built with the system C compiler.
 *
 * Each record of a rank (sorted by rank, framed by init and finalize) becomes up to four rows, in this order:
 *   [call-site enter] [compute: the gap since the previous record's exit] [call-site leave] [the record]
 * (init and finalize are not rows).  A gap is a compute row when it is longer than min_compute (and positive);
 * it is wrapped in a call-site region (named after the previous record's call site and this one's) always
 * (mode 1), outside user regions only (mode 2: user-region depth 0 before the record) or never (mode 0).
 *
 * wl_records_count: checks the framing, counts the rows (and each rank's rows and cause rows) and lists the distinct
 * (previous site, site) pairs of the wrapped gaps in order of first appearance (so each pair is named once, by Python).
 * wl_records_fill: writes every column of the rows of a range of whole ranks, given the region-name id of each pair
 * and the range's first row and first cause number (from the per-rank counts), so that two threads can each fill
 * a contiguous range of ranks and write exactly what one call over all the records writes.
 * The record structs are the numpy dtypes LOG_DTYPE and ARG_DTYPE of program_records.py.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "waitlab_actions.h"
#include "waitlab_pairs.h"

typedef struct { int32_t rank, code; double t_enter, t_exit; } Log;
typedef struct {
  int32_t peer, tag, name, comm, step, flags;
  double value, value2;
  uint64_t site;
} Arg;

enum { FLAG_INJECTED = 1, FLAG_CAUSE = 2 };
enum { ERR_FRAMING = -1, ERR_MEMORY = -2 };

/* what happens before record i: has_gap (compute row), wrap (call-site region); depth is the rank's user-region
 * depth before the record (updated here) */
static inline void roles(const Log* log, int64_t i, int mode, double min_compute, int32_t* depth, int* has_gap,
                         int* wrap) {
  int32_t code = log[i].code;
  if (code == WL_INIT) *depth = 0;
  double gap = code == WL_INIT ? 0.0 : log[i].t_enter - log[i - 1].t_exit;
  *has_gap = gap > min_compute && gap > 0.0;
  *wrap = *has_gap && (mode == 1 || (mode == 2 && *depth == 0));
  *depth += (code == WL_ENTER) - (code == WL_LEAVE);
}

/* Rows of the operation table (>= 0), or ERR_FRAMING (records not framed by init and finalize per rank) or
 * ERR_MEMORY.  The distinct site pairs of wrapped gaps go to pair_a/pair_b (first appearance first) up to
 * pair_cap of them; their number to *n_pairs (more than pair_cap: call again with room for them).
 * rank_records[k] / rank_rows[k] / rank_causes[k]: the records, rows and cause rows (FLAG_CAUSE records) of the
 * k-th rank in the records (room for n_ranks of each; complete only when the framing holds). */
int64_t wl_records_count(const Log* log, const Arg* arg, int64_t n, int32_t n_ranks, int mode, double min_compute,
                         uint64_t* pair_a, uint64_t* pair_b, int64_t pair_cap, int64_t* n_pairs,
                         int64_t* rank_records, int64_t* rank_rows, int64_t* rank_causes) {
  int64_t rows = 0, finalizes = 0, k = -1;
  int32_t depth = 0;
  Pairs p;
  if (pairs_init(&p, 1024) < 0) { pairs_free(&p); return ERR_MEMORY; }
  for (int64_t i = 0; i < n; i++) {
    int starts = i == 0 || log[i].rank != log[i - 1].rank;
    int code = log[i].code;
    if (starts != (code == WL_INIT)) { pairs_free(&p); return ERR_FRAMING; }
    finalizes += code == WL_FINALIZE;
    if (starts && ++k >= n_ranks) { pairs_free(&p); return ERR_FRAMING; }
    if (starts) { rank_records[k] = 0; rank_rows[k] = 0; rank_causes[k] = 0; }
    rank_records[k]++;
    int has_gap, wrap;
    roles(log, i, mode, min_compute, &depth, &has_gap, &wrap);
    int64_t r = has_gap + 2 * wrap + (code != WL_INIT && code != WL_FINALIZE);
    rows += r;
    rank_rows[k] += r;
    rank_causes[k] += code != WL_INIT && code != WL_FINALIZE && (arg[i].flags & FLAG_CAUSE);
    if (wrap) {
      int64_t id = pairs_get(&p, arg[i - 1].site, arg[i].site);
      if (id < 0) { pairs_free(&p); return ERR_MEMORY; }
      if (id < pair_cap && id == p.n - 1) { pair_a[id] = arg[i - 1].site; pair_b[id] = arg[i].site; }
    }
  }
  *n_pairs = p.n;
  pairs_free(&p);
  if (finalizes != n_ranks) return ERR_FRAMING;
  return rows;
}

/* whether a double is +0.0 (all bits zero) */
static inline int is_zero_bits(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b == 0;
}

/* Fill the operation table's columns (rows as counted by wl_records_count with the same arguments) for records
 * [lo, hi) (whole ranks: record lo is an init), whose first row is row0 and first cause number cause0 (the rows and
 * cause rows of the ranks before lo, from wl_records_count's per-rank counts; 0 and 0 for lo = 0).  The columns
 * are the whole table's: only rows row0 .. are written, so calls on disjoint ranges can run at the same time.
 * value2, excess, comm and injected must come zeroed (calloc, np.zeros): only their non-zero values are written, so
 * the pages of a column that is zero throughout (most programs: no second values, no injected delays, MPI_COMM_WORLD
 * only) are never written, and never faulted in.
 * pair_name[k]: region-name id of the k-th site pair.  record: index of the layer record a row is (-1: a derived
 * compute or call-site row); injected: rows the layer injected; cause/excess: the program's own delays
 * (FLAG_CAUSE), numbered 0, 1, ... in row order.  Returns the number of cause rows of the range, or ERR_MEMORY. */
int64_t wl_records_fill(const Log* log, const Arg* arg, int64_t lo, int64_t hi, int64_t row0, int64_t cause0,
                        int mode, double min_compute,
                        const uint64_t* pair_a, const uint64_t* pair_b, const int32_t* pair_name, int64_t n_pairs,
                        int32_t* rank, int32_t* seq, int8_t* code, int32_t* step, int32_t* name, double* value,
                        double* value2, int32_t* peer, int32_t* tag, int64_t* cause, double* excess, int32_t* comm,
                        double* t_enter, double* t_exit, int64_t* record, uint8_t* injected) {
  Pairs p;
  int64_t cap = 1024;
  while (cap < 2 * n_pairs + 2) cap *= 2;
  if (pairs_init(&p, cap) < 0) { pairs_free(&p); return ERR_MEMORY; }
  for (int64_t k = 0; k < n_pairs; k++) pairs_get(&p, pair_a[k], pair_b[k]);
  int64_t o = row0, causes = cause0;
  int32_t depth = 0, s = 0;
  for (int64_t i = lo; i < hi; i++) {
    const Log* L = &log[i];
    const Arg* A = &arg[i];
    int has_gap, wrap;
    if (L->code == WL_INIT) s = 0;
    roles(log, i, mode, min_compute, &depth, &has_gap, &wrap);
    double t0 = has_gap || wrap ? log[i - 1].t_exit : 0.0;
    int32_t site_name = -1;
    if (wrap) site_name = pair_name[p.id[pairs_find(&p, arg[i - 1].site, A->site)]];
#define ROW(c, nm, te, tx, v)                                                                                   \
  do {                                                                                                         \
    rank[o] = L->rank; seq[o] = s++; code[o] = (int8_t)(c); step[o] = A->step; name[o] = (nm); value[o] = (v); \
    peer[o] = -1; tag[o] = 0; cause[o] = -1; t_enter[o] = (te); t_exit[o] = (tx); record[o] = -1;             \
  } while (0)
    if (wrap) { ROW(WL_ENTER, site_name, t0, t0, 0.0); o++; }
    if (has_gap) { ROW(WL_COMPUTE, -1, t0, L->t_enter, L->t_enter - t0); o++; }
    if (wrap) { ROW(WL_LEAVE, site_name, L->t_enter, L->t_enter, 0.0); o++; }
    if (L->code != WL_INIT && L->code != WL_FINALIZE) {
      ROW(L->code, A->name, L->t_enter, L->t_exit, A->value);
      if (!is_zero_bits(A->value2)) value2[o] = A->value2;
      peer[o] = A->peer; tag[o] = A->tag; record[o] = i;
      if (A->comm != 0) comm[o] = A->comm;
      if (A->flags & FLAG_INJECTED) injected[o] = 1;
      if (A->flags & FLAG_CAUSE) { cause[o] = causes++; if (!is_zero_bits(A->value)) excess[o] = A->value; }
      o++;
    }
#undef ROW
  }
  pairs_free(&p);
  return causes - cause0;
}

/* Renumber the region names (field 0) or communicators (field 1) of each rank's records from the rank's own ids
 * to global ones: rank r's records are [ends[r-1], ends[r]) and its table lut[offset[r] .. offset[r] + size[r]).
 * A name of -1 (none) stays -1.  Returns -1, or the index of the first record whose id the table does not have. */
int64_t wl_records_renumber(Arg* arg, const int64_t* ends, int32_t n_ranks, int field, const int32_t* lut,
                            const int64_t* offset, const int64_t* size) {
  int64_t i = 0;
  for (int32_t r = 0; r < n_ranks; r++) {
    const int32_t* table = lut + offset[r];
    for (; i < ends[r]; i++) {
      int32_t* v = field == 0 ? &arg[i].name : &arg[i].comm;
      if (field == 0 && *v == -1) continue;
      if (*v < 0 || *v >= size[r]) return i;
      *v = table[*v];
    }
  }
  return -1;
}

/* Region structure of an operation table in (rank, seq) order (models/regions.py computes the same with numpy):
 * enclosing[i] is the row of the innermost region open before row i on its rank (-1: none; a leave's is its own
 * enter), and leave_of[k] the row of the leave closing the k-th enter (enters in row order).  Call paths: depth[i]
 * is the number of regions open before row i, path[i] the call path of row i (a region's own path; other rows: the
 * path of the innermost open region, 0 at top level); paths 1, 2, ... are numbered in order of first appearance,
 * path k being region name path_name[k - 1] inside path path_parent[k - 1].  Returns -1, or the row of the first
 * problem (a leave without an enter or closing another region's enter, a rank ending with a region open):
 * models/regions.py then names it.  stack: room for 3 (n / 2 + 1) numbers; path_parent/path_name: room for one
 * path per enter. */
int64_t wl_region_structure(const int8_t* code, const int32_t* rank, const int32_t* name, int64_t n,
                            int64_t* enclosing, int64_t* leave_of, int32_t* path, int16_t* depth,
                            int32_t* path_parent, int32_t* path_name, int64_t* n_paths, int64_t* stack) {
  int64_t top = 0, k = 0, room = n / 2 + 1;
  int64_t *slot = stack + room, *open_path = stack + 2 * room; /* beside each open enter: its index k, its path */
  Pairs p;
  if (pairs_init(&p, 1024) < 0) { pairs_free(&p); return ERR_MEMORY; }
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++) {
    if (i > 0 && rank[i] != rank[i - 1] && top > 0) { bad = i - 1; break; }
    enclosing[i] = top > 0 ? stack[top - 1] : -1;
    depth[i] = (int16_t)top;
    int64_t here = top > 0 ? open_path[top - 1] : 0;
    if (code[i] == WL_ENTER) {
      if (top >= room) { bad = i; break; }
      int64_t id = pairs_get(&p, (uint64_t)here, (uint64_t)(int64_t)name[i]);
      if (id < 0) { pairs_free(&p); return ERR_MEMORY; }
      if (id == p.n - 1) { path_parent[id] = (int32_t)here; path_name[id] = name[i]; }
      here = id + 1;
      slot[top] = k++;
      open_path[top] = here;
      stack[top++] = i;
    } else if (code[i] == WL_LEAVE) {
      if (top == 0 || name[stack[top - 1]] != name[i]) { bad = i; break; }
      top--;
      leave_of[slot[top]] = i;
    }
    path[i] = (int32_t)here;
  }
  *n_paths = p.n;
  pairs_free(&p);
  if (bad >= 0) return bad;
  return top > 0 ? n - 1 : -1;
}
