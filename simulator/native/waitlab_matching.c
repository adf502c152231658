/* Message matching, request completions and collective instances of an operation table in two linear passes
 * (issue 25: waitlab's own work around a program run).  Used by simulator/native_matching.py through ctypes; built
 * with the system C compiler.  The numpy versions (simulator/matching.py match_messages and completions,
 * simulator/timeline.py collective_instances) stay the reference: every result here is theirs, row for row.
 *
 * wl_links: message ids (the k-th send of a (source, destination, tag) channel meets the k-th receive of it; ids
 * numbered in (channel, row) order, channels in lexicographic order, as the numpy stable sort numbers them), the
 * waits' ids (the k-th wait of a (rank, recv?, peer, tag) completes the k-th request of it), the completing row of
 * every request (its wait, else the rank's next waitall) and, per collective row, its count k among the earlier
 * collectives of its (communicator, rank) plus the counts per (communicator, rank).
 * wl_instances: instance = offset[comm] + k, checking that every member of an instance calls the same collective.
 *
 * Anything the numpy versions would reject or order in a way this pass does not reproduce (rows out of (rank, seq)
 * order, peers outside the world, unmatched messages, waits without request, two waits of one rank on one message,
 * mixed collectives) returns WL_FALLBACK: the caller then runs the numpy versions, which raise their own message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { WL_OK = 0, WL_FALLBACK = 1, WL_MEMORY = -2 };

/* open-addressing table of 4-int64 keys -> id (ids in order of insertion), growing at load 1/2 */
typedef struct { int64_t *k, *id; int64_t cap, n; } Table;

static uint64_t mix4(const int64_t* k) {
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < 4; i++) { h ^= (uint64_t)k[i] + 0x632BE59BD9B4E019ULL + (h << 6) + (h >> 2); h *= 0xFF51AFD7ED558CCDULL; }
  h ^= h >> 33;
  return h;
}

static int table_init(Table* t, int64_t cap) {
  t->cap = cap; t->n = 0;
  t->k = malloc(sizeof(int64_t) * 4 * cap); t->id = malloc(sizeof(int64_t) * cap);
  if (!t->k || !t->id) return WL_MEMORY;
  for (int64_t i = 0; i < cap; i++) t->id[i] = -1;
  return WL_OK;
}

static void table_free(Table* t) { free(t->k); free(t->id); t->k = NULL; t->id = NULL; }

static int64_t table_slot(const Table* t, const int64_t* k) {
  int64_t s = (int64_t)(mix4(k) & (uint64_t)(t->cap - 1));
  while (t->id[s] >= 0 && memcmp(t->k + 4 * s, k, 4 * sizeof(int64_t)) != 0) s = (s + 1) & (t->cap - 1);
  return s;
}

static int64_t table_find(const Table* t, const int64_t* k) { return t->id[table_slot(t, k)]; }

/* id of k, inserted with the next id if new; WL_MEMORY if the table could not grow */
static int64_t table_get(Table* t, const int64_t* k) {
  int64_t s = table_slot(t, k);
  if (t->id[s] >= 0) return t->id[s];
  if (2 * (t->n + 1) > t->cap) {
    Table g;
    if (table_init(&g, 2 * t->cap) != WL_OK) { table_free(&g); return WL_MEMORY; }
    for (int64_t i = 0; i < t->cap; i++)
      if (t->id[i] >= 0) { int64_t d = table_slot(&g, t->k + 4 * i); memcpy(g.k + 4 * d, t->k + 4 * i, 4 * sizeof(int64_t)); g.id[d] = t->id[i]; }
    g.n = t->n;
    table_free(t);
    *t = g;
    s = table_slot(t, k);
  }
  memcpy(t->k + 4 * s, k, 4 * sizeof(int64_t));
  t->id[s] = t->n++;
  return t->id[s];
}

static const int64_t* g_keys; /* channel keys for the qsort of channel ids */
static int cmp_channel(const void* a, const void* b) {
  const int64_t* x = g_keys + 4 * *(const int64_t*)a;
  const int64_t* y = g_keys + 4 * *(const int64_t*)b;
  for (int i = 0; i < 3; i++) if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}

int64_t wl_links(const int8_t* code, const int32_t* rank, const int32_t* seq, const int32_t* peer, const int32_t* tag,
                 const double* value2, const int32_t* comm, int64_t n, int32_t n_ranks, int32_t n_comms, int32_t n_codes,
                 const uint8_t* is_send, const uint8_t* is_recv, const uint8_t* is_nb, const uint8_t* is_blocking,
                 const uint8_t* is_coll, int32_t c_wait, int32_t c_waitall, int32_t c_irecv,
                 int64_t* match, int64_t* done, int64_t* coll_k, int64_t* coll_counts) {
  int64_t rc = WL_OK, n_send = 0, n_recv = 0, n_nb = 0;
  Table ch = {0}, gr = {0};
  int64_t *ch_k = NULL, *ch_ns = NULL, *ch_nr = NULL, *order = NULL, *base = NULL, *gr_n = NULL, *gr_w = NULL,
          *gr_off = NULL, *slots = NULL, *w0 = NULL, *w1 = NULL;
  /* rows in (rank, seq) order, peers and communicators in range */
  for (int64_t i = 0; i < n; i++) {
    if (rank[i] < 0 || rank[i] >= n_ranks || code[i] < 0 || code[i] >= n_codes) return WL_FALLBACK;
    if (i && (rank[i] < rank[i - 1] || (rank[i] == rank[i - 1] && seq[i] <= seq[i - 1]))) return WL_FALLBACK;
    uint8_t c = (uint8_t)code[i];
    if ((is_send[c] || is_recv[c]) && (peer[i] < 0 || peer[i] >= n_ranks)) return WL_FALLBACK;
    if (is_coll[c] && (comm[i] < 0 || comm[i] >= n_comms)) return WL_FALLBACK;
    n_send += is_send[c]; n_recv += is_recv[c];
  }
  if (n_send != n_recv) return WL_FALLBACK;
  /* pass 1: channel and per-channel count of every send and receive (match holds the count for now), requests'
   * groups, collectives' counts, blocking rows complete themselves */
  if (table_init(&ch, 1024) != WL_OK || table_init(&gr, 1024) != WL_OK) { rc = WL_MEMORY; goto out; }
  int64_t ch_cap = 1024, gr_cap = 1024;
  ch_ns = calloc(ch_cap, sizeof(int64_t)); ch_nr = calloc(ch_cap, sizeof(int64_t)); gr_n = calloc(gr_cap, sizeof(int64_t));
  int64_t* ch_of = malloc(sizeof(int64_t) * (n ? n : 1)); /* channel (sends/receives) or group (requests) */
  if (!ch_ns || !ch_nr || !gr_n || !ch_of) { free(ch_of); rc = WL_MEMORY; goto out; }
  memset(coll_counts, 0, sizeof(int64_t) * (size_t)n_comms * (size_t)n_ranks);
  for (int64_t i = 0; i < n; i++) {
    uint8_t c = (uint8_t)code[i];
    match[i] = -1; done[i] = -1; coll_k[i] = -1;
    if (is_blocking[c]) done[i] = i;
    if (is_coll[c]) coll_k[i] = coll_counts[(int64_t)comm[i] * n_ranks + rank[i]]++;
    if (is_send[c] || is_recv[c]) {
      int64_t key[4] = {is_send[c] ? rank[i] : peer[i], is_send[c] ? peer[i] : rank[i], tag[i], 0};
      int64_t id = table_get(&ch, key);
      if (id < 0) { free(ch_of); rc = WL_MEMORY; goto out; }
      if (id >= ch_cap) {
        ch_ns = realloc(ch_ns, sizeof(int64_t) * 2 * ch_cap); ch_nr = realloc(ch_nr, sizeof(int64_t) * 2 * ch_cap);
        if (!ch_ns || !ch_nr) { free(ch_of); rc = WL_MEMORY; goto out; }
        memset(ch_ns + ch_cap, 0, sizeof(int64_t) * ch_cap); memset(ch_nr + ch_cap, 0, sizeof(int64_t) * ch_cap);
        ch_cap *= 2;
      }
      match[i] = is_send[c] ? ch_ns[id]++ : ch_nr[id]++;
      ch_of[i] = id;
    }
    if (is_nb[c]) {
      int64_t key[4] = {rank[i], c == c_irecv, peer[i], tag[i]};
      int64_t g = table_get(&gr, key);
      if (g < 0) { free(ch_of); rc = WL_MEMORY; goto out; }
      if (g >= gr_cap) {
        gr_n = realloc(gr_n, sizeof(int64_t) * 2 * gr_cap);
        if (!gr_n) { free(ch_of); rc = WL_MEMORY; goto out; }
        memset(gr_n + gr_cap, 0, sizeof(int64_t) * gr_cap);
        gr_cap *= 2;
      }
      gr_n[g]++; n_nb++;
    }
  }
  /* channels in lexicographic order: the id of a message is the number of sends of earlier channels plus k */
  int64_t n_ch = ch.n;
  ch_k = malloc(sizeof(int64_t) * 4 * (n_ch ? n_ch : 1)); order = malloc(sizeof(int64_t) * (n_ch ? n_ch : 1));
  base = malloc(sizeof(int64_t) * (n_ch ? n_ch : 1));
  if (!ch_k || !order || !base) { free(ch_of); rc = WL_MEMORY; goto out; }
  for (int64_t s = 0; s < ch.cap; s++) if (ch.id[s] >= 0) memcpy(ch_k + 4 * ch.id[s], ch.k + 4 * s, 4 * sizeof(int64_t));
  for (int64_t j = 0; j < n_ch; j++) order[j] = j;
  g_keys = ch_k;
  qsort(order, (size_t)n_ch, sizeof(int64_t), cmp_channel);
  int64_t acc = 0;
  for (int64_t j = 0; j < n_ch; j++) {
    int64_t id = order[j];
    if (ch_ns[id] != ch_nr[id]) { free(ch_of); rc = WL_FALLBACK; goto out; } /* a message without partner */
    base[id] = acc; acc += ch_ns[id];
  }
  /* requests of each group in row order (CSR) */
  int64_t n_gr = gr.n;
  gr_off = malloc(sizeof(int64_t) * (n_gr + 1)); gr_w = calloc(n_gr ? n_gr : 1, sizeof(int64_t));
  slots = malloc(sizeof(int64_t) * (n_nb ? n_nb : 1));
  if (!gr_off || !gr_w || !slots) { free(ch_of); rc = WL_MEMORY; goto out; }
  gr_off[0] = 0;
  for (int64_t g = 0; g < n_gr; g++) gr_off[g + 1] = gr_off[g] + gr_n[g];
  for (int64_t i = 0; i < n; i++) {
    uint8_t c = (uint8_t)code[i];
    if (is_send[c] || is_recv[c]) match[i] += base[ch_of[i]];
    if (is_nb[c]) {
      int64_t key[4] = {rank[i], c == c_irecv, peer[i], tag[i]};
      int64_t g = table_find(&gr, key);
      slots[gr_off[g] + gr_w[g]++] = i;
    }
  }
  free(ch_of);
  /* pass 2: the k-th wait of a group takes the k-th request's message; each message's waits (at most one per rank) */
  memset(gr_w, 0, sizeof(int64_t) * (n_gr ? n_gr : 1));
  w0 = malloc(sizeof(int64_t) * (acc ? acc : 1)); w1 = malloc(sizeof(int64_t) * (acc ? acc : 1));
  if (!w0 || !w1) { rc = WL_MEMORY; goto out; }
  for (int64_t m = 0; m < acc; m++) w0[m] = w1[m] = -1;
  for (int64_t i = 0; i < n; i++) {
    if (code[i] != c_wait) continue;
    int64_t key[4] = {rank[i], value2[i] != 0, peer[i], tag[i]};
    int64_t g = n_gr ? table_find(&gr, key) : -1;
    if (g < 0 || gr_w[g] >= gr_n[g]) { rc = WL_FALLBACK; goto out; } /* completes no pending request */
    int64_t m = match[slots[gr_off[g] + gr_w[g]++]];
    match[i] = m;
    if (w0[m] < 0) w0[m] = i;
    else if (w1[m] < 0 && rank[w0[m]] != rank[i]) w1[m] = i;
    else { rc = WL_FALLBACK; goto out; } /* two waits of one rank on one message: numpy's choice is unordered */
  }
  /* completions: the request's wait (same rank, same message), else the rank's next waitall */
  int64_t next_wa = -1;
  for (int64_t i = n - 1; i >= 0; i--) {
    if (i < n - 1 && rank[i] != rank[i + 1]) next_wa = -1;
    if (code[i] == c_waitall) { next_wa = i; continue; }
    if (!is_nb[(uint8_t)code[i]]) continue;
    int64_t m = match[i];
    if (w0[m] >= 0 && rank[w0[m]] == rank[i]) done[i] = w0[m];
    else if (w1[m] >= 0 && rank[w1[m]] == rank[i]) done[i] = w1[m];
    else done[i] = next_wa;
  }
out:
  table_free(&ch); table_free(&gr);
  free(ch_k); free(ch_ns); free(ch_nr); free(order); free(base); free(gr_n); free(gr_w); free(gr_off); free(slots);
  free(w0); free(w1);
  return rc;
}

int64_t wl_instances(const int8_t* code, const int32_t* comm, int64_t n, const uint8_t* is_coll,
                     const int64_t* offset, int64_t n_inst, int64_t* inst) {
  int8_t* lead = malloc(n_inst ? n_inst : 1);
  uint8_t* seen = calloc(n_inst ? n_inst : 1, 1);
  if (!lead || !seen) { free(lead); free(seen); return WL_MEMORY; }
  int64_t rc = WL_OK;
  for (int64_t i = 0; i < n; i++) {
    if (!is_coll[(uint8_t)code[i]]) continue;
    int64_t id = offset[comm[i]] + inst[i];
    inst[i] = id;
    if (id < 0 || id >= n_inst) { rc = WL_FALLBACK; break; }
    if (!seen[id]) { seen[id] = 1; lead[id] = code[i]; }
    else if (lead[id] != code[i]) { rc = WL_FALLBACK; break; } /* members call different collectives */
  }
  free(lead); free(seen);
  return rc;
}
