/* The event table's columns from an operation table (issue 25: waitlab's own work around a program run).
 * Used by simulator/native_events.py through ctypes; built with the system C compiler.  The numpy version
 * (simulator/timeline.py event_columns_numpy) stays the reference: every column here is its column, row for row.
 *
 * Output rows are the operations that are not leave markers, in row order; an enter marker becomes its region's row
 * (exit: the exit of the leave closing it).  Inputs besides the operation table's columns and times: the links
 * (native_matching.links: message id, completing row, collective instance of every row); the region structure is
 * worked out on the way.  Three passes over the rows, each writing a few columns: one pass writing all twenty was
 * 1.5 times slower (0.25-0.35 against 0.18-0.2 CPU s at 5.8 M rows), too many arrays streamed at once.
 *
 * Bytes sent and received follow models/byte_accounting.py (Score-P's accounting of collectives), rule by rule, in
 * the same double-precision expressions rounded half to even (rint, numpy's np.rint): the byte rules' order is
 * BYTE_RULES of models/action.py, which native_events.py checks before calling.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "waitlab_actions.h"
#include "waitlab_pairs.h"

/* models/action.py BYTE_RULES, in its order */
enum { R_NONE, R_P2P_SEND, R_P2P_RECV, R_ONE_TO_ALL, R_ALL_TO_ONE, R_ONE_TO_ALL_V, R_ALL_TO_ONE_V, R_ALL_TO_ALL,
       R_ALL_TO_ALL_V, R_REDUCE_SCATTER, R_SCAN, R_EXSCAN };

/* sent and received bytes (before rounding) of one row: v, v2 its values, n its communicator's size, me its rank in
 * it, is_root whether it is the root (models/byte_accounting.py _rule_bytes) */
static inline void rule_bytes(int rule, int code, double v, double v2, double n, double me, int is_root, double* s,
                              double* r) {
  switch (rule) {
    case R_P2P_SEND: *s = v; *r = 0.0; break;
    case R_P2P_RECV: *s = 0.0; *r = v; break;
    case R_ONE_TO_ALL: *s = is_root ? n * v : 0.0; *r = code == WL_BCAST ? v : v2; break;
    case R_ALL_TO_ONE: *s = v; *r = is_root ? n * (code == WL_REDUCE ? v : v2) : 0.0; break;
    case R_ONE_TO_ALL_V: *s = is_root ? v : 0.0; *r = v2; break;
    case R_ALL_TO_ONE_V: *s = v; *r = is_root ? v2 : 0.0; break;
    case R_ALL_TO_ALL: *s = n * v; *r = n * (code == WL_ALLREDUCE ? v : v2); break;
    case R_ALL_TO_ALL_V: *s = code == WL_ALLGATHERV ? n * v : v; *r = v2; break;
    case R_REDUCE_SCATTER: *s = v; *r = v; break;
    case R_SCAN: *s = (n - me) * v; *r = (me + 1) * v; break;
    case R_EXSCAN: *s = (n - me - 1) * v; *r = me * v; break;
    default: *s = 0.0; *r = 0.0; break;
  }
}

/* whether a double is +0.0 (all bits zero) */
static inline int is_zero_bits(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  return b == 0;
}

/* a row reference: int32 (ref32) or int64 */
static inline void put_ref(void* a, int64_t o, int64_t v, int ref32) {
  if (ref32) ((int32_t*)a)[o] = (int32_t)v;
  else ((int64_t*)a)[o] = v;
}

/* The event table's columns (m rows: the operations but leave markers).  Per action code (n_codes of them):
 * kind_of_code (event kind), has_peer (the peer column is kept), rule_of_code (byte rule).  n_comms communicators
 * (0: MPI_COMM_WORLD); when n_comms > 1, local[c * n_ranks + r] is world rank r's rank in communicator c and
 * comm_size[c] its size (else the world rank, the peer and n_ranks are used, as numpy does).  Region rows get kind
 * region_kind and op region_op; region_none is the region code of a row outside any region.
 *
 * Memory: the links' inst array is consumed: the collective instances are first folded into match_op (which then
 * holds every row's match), and inst then holds each row's output row (-1: a leave), so no other array of n row
 * numbers is touched.  o_comm and o_excess must come zeroed (calloc, np.zeros): only their non-zero values are
 * written, so the pages of a column that is zero throughout (most programs: MPI_COMM_WORLD only, no injected
 * causes) are never written, and never faulted in.
 *
 * The region structure is worked out in the same pass (native/waitlab_records.c wl_region_structure's rules, so its
 * per-row arrays never exist): a stack per rank of the open regions (their output row, name and call path) gives
 * each row its parent, region, depth and call path, and a region row its exit when its leave comes.  Call paths are numbered 1, 2, ... in order of first appearance (0: top
 * level), path k being region name path_name[k - 1] inside path path_parent[k - 1] (room for one per enter); o_path
 * holds these numbers: the caller renames them (wl_rename).  stack: room for 3 (n / 2 + 1) numbers.  Returns m; -1
 * for a table whose codes, communicators or ranks are out of range (nothing written); -3 - i for a region structure
 * with a problem at row i (a leave without an enter or closing another region's enter, a rank ending with a region
 * open: the caller has numpy name it); ERR_MEMORY_PAIRS when out of memory. */
int64_t wl_event_table(
    int64_t n, const int8_t* code, const int32_t* rank, const int32_t* seq, const int32_t* step, const int32_t* name,
    const double* value, const double* value2, const int32_t* peer, const int32_t* tag, const int64_t* cause,
    const double* excess, const int32_t* comm, const double* t_enter, const double* t_exit,
    int64_t* match_op, const int64_t* done_op, int64_t* inst, int64_t* stack, int32_t* path_parent,
    int32_t* path_name, int64_t* n_paths,
    int32_t n_codes, const int8_t* kind_of_code, const uint8_t* has_peer, const int8_t* rule_of_code, int32_t n_ranks,
    int32_t n_comms, const int64_t* local, const int64_t* comm_size, int8_t region_kind, int16_t region_op,
    int32_t region_none,
    int ref32, int32_t* o_rank, int32_t* o_seq, int8_t* o_kind, int16_t* o_op, int32_t* o_region, int64_t* o_path,
    int32_t* o_step, double* o_enter, double* o_exit, int32_t* o_peer, int32_t* o_tag, int32_t* o_comm,
    int64_t* o_bytes, int64_t* o_recv, void* o_match, void* o_done, void* o_parent, int16_t* o_depth, void* o_cause,
    double* o_excess) {
  int64_t m = 0, *out_index = inst;
  for (int64_t i = 0; i < n; i++) { /* checked before anything is written: a refused table leaves links as they were */
    int c = code[i];
    if (c == WL_LEAVE) continue;
    if (c < 0 || c >= n_codes) return -1;
    if (n_comms > 1 && (comm[i] < 0 || comm[i] >= n_comms || rank[i] < 0 || rank[i] >= n_ranks || peer[i] >= n_ranks))
      return -1;
  }
  for (int64_t i = 0; i < n; i++) {
    if (inst[i] >= 0) match_op[i] = inst[i];
    out_index[i] = code[i] == WL_LEAVE ? -1 : m++;
  }
  int64_t room = n / 2 + 1, top = 0, bad = -1;
  int64_t *open_row = stack, *open_name = stack + room, *open_path = stack + 2 * room;
  Pairs p;
  if (pairs_init(&p, 1024) < 0) { pairs_free(&p); return ERR_MEMORY_PAIRS; }
  int64_t o = 0;
  for (int64_t i = 0; i < n; i++) {
    if (i > 0 && rank[i] != rank[i - 1] && top > 0) { bad = i - 1; break; }
    int c = code[i];
    int64_t here = top > 0 ? open_path[top - 1] : 0;
    if (c == WL_LEAVE) {
      if (top == 0 || open_name[top - 1] != name[i]) { bad = i; break; }
      top--;
      o_exit[open_row[top]] = t_exit[i];
      continue;
    }
    int region = c == WL_ENTER;
    int64_t parent = top > 0 ? open_row[top - 1] : -1;
    o_depth[o] = (int16_t)top;
    o_region[o] = region ? name[i] : (parent >= 0 ? (int32_t)open_name[top - 1] : -1);
    if (o_region[o] < 0) o_region[o] = region_none;
    put_ref(o_parent, o, parent, ref32);
    if (region) {
      if (top >= room) { bad = i; break; }
      int64_t id = pairs_get(&p, (uint64_t)here, (uint64_t)(int64_t)name[i]);
      if (id < 0) { pairs_free(&p); return ERR_MEMORY_PAIRS; }
      if (id == p.n - 1) { path_parent[id] = (int32_t)here; path_name[id] = name[i]; }
      here = id + 1;
      open_row[top] = o; open_name[top] = name[i]; open_path[top] = here;
      top++;
    }
    o_path[o] = here;
    o_enter[o] = t_enter[i];
    if (!region) o_exit[o] = t_exit[i];
    o++;
  }
  *n_paths = p.n;
  pairs_free(&p);
  if (bad < 0 && top > 0) bad = n - 1;
  if (bad >= 0) return -3 - bad;
  /* the other columns in two more passes over the rows: fewer arrays streamed at once */
  o = 0;
  for (int64_t i = 0; i < n; i++) {
    if (code[i] == WL_LEAVE) continue;
    o_rank[o] = rank[i];
    o_seq[o] = seq[i];
    o_step[o] = step[i];
    o_tag[o] = tag[i];
    if (!is_zero_bits(excess[i])) o_excess[o] = excess[i];
    put_ref(o_cause, o, cause[i], ref32);
    o++;
  }
  o = 0;
  for (int64_t i = 0; i < n; i++) {
    int c = code[i];
    if (c == WL_LEAVE) continue;
    int region = c == WL_ENTER;
    o_kind[o] = region ? region_kind : kind_of_code[c];
    o_op[o] = region ? region_op : (int16_t)c;
    o_peer[o] = has_peer[c] && !region ? peer[i] : -1;
    if (!region && comm[i] != 0) o_comm[o] = comm[i];
    put_ref(o_match, o, region ? -1 : match_op[i], ref32);
    put_ref(o_done, o, done_op[i] >= 0 ? out_index[done_op[i]] : -1, ref32);
    double s = 0.0, r = 0.0;
    int rule = region ? R_NONE : rule_of_code[c];
    if (rule != R_NONE) {
      double size;
      int64_t me, root;
      if (n_comms > 1) {
        int32_t cm = comm[i];
        size = (double)comm_size[cm];
        me = local[(int64_t)cm * n_ranks + rank[i]];
        root = peer[i] >= 0 ? local[(int64_t)cm * n_ranks + peer[i]] : -1;
      } else {
        size = (double)n_ranks;
        me = rank[i];
        root = peer[i];
      }
      rule_bytes(rule, c, value[i], value2[i], size, (double)me, me == root, &s, &r);
    }
    o_bytes[o] = (int64_t)rint(s);
    o_recv[o] = (int64_t)rint(r);
    o++;
  }
  return m;
}

/* a[i] = table[a[i]] for the m numbers of a (the call paths' numbers to their sorted names' positions) */
void wl_rename(int64_t* a, int64_t m, const int64_t* table) {
  for (int64_t i = 0; i < m; i++) a[i] = table[a[i]];
}
