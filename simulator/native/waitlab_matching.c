/* Message matching, request completions and collective instances of an operation table in a few linear passes
 * (issue 25: waitlab's own work around a program run).  Used by simulator/native_matching.py through ctypes; built
 * with the system C compiler.  The numpy versions (simulator/matching.py match_messages and completions,
 * simulator/timeline.py collective_instances) stay the reference: every result here is theirs, row for row.
 *
 * wl_links: message ids (sends and receives each sorted stably by (source, destination, tag) with a radix sort: the
 * j-th of each is message j, as numpy's stable sort numbers them), the waits' ids (the k-th wait of a (rank, recv?,
 * peer, tag) completes the k-th request of it: both sorted stably by that key and joined), the completing row of
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

/* stable LSD radix sort of (key, row) pairs by key (keys below 2**bits), 11 bits a pass; WL_MEMORY on failure */
static int radix_sort(uint64_t* key, int64_t* row, int64_t m, int bits) {
  if (m < 2 || bits == 0) return WL_OK;
  uint64_t* k2 = malloc(sizeof(uint64_t) * m);
  int64_t* r2 = malloc(sizeof(int64_t) * m);
  int64_t* count = malloc(sizeof(int64_t) * 2048);
  if (!k2 || !r2 || !count) { free(k2); free(r2); free(count); return WL_MEMORY; }
  for (int shift = 0; shift < bits; shift += 11) {
    memset(count, 0, sizeof(int64_t) * 2048);
    for (int64_t i = 0; i < m; i++) count[(key[i] >> shift) & 2047]++;
    int64_t acc = 0;
    for (int d = 0; d < 2048; d++) { int64_t c = count[d]; count[d] = acc; acc += c; }
    for (int64_t i = 0; i < m; i++) { int64_t p = count[(key[i] >> shift) & 2047]++; k2[p] = key[i]; r2[p] = row[i]; }
    memcpy(key, k2, sizeof(uint64_t) * m); memcpy(row, r2, sizeof(int64_t) * m);
  }
  free(k2); free(r2); free(count);
  return WL_OK;
}

static int bits_of(uint64_t x) { int b = 0; while (x) { b++; x >>= 1; } return b; }

int64_t wl_links(const int8_t* code, const int32_t* rank, const int32_t* seq, const int32_t* peer, const int32_t* tag,
                 const double* value2, const int32_t* comm, const int32_t* name, int64_t n, int32_t n_ranks, int32_t n_comms, int32_t n_codes,
                 const uint8_t* is_send, const uint8_t* is_recv, const uint8_t* is_nb, const uint8_t* is_blocking,
                 const uint8_t* is_coll, int32_t c_wait, int32_t c_waitall, int32_t c_irecv,
                 int64_t* match, int64_t* done, int64_t* coll_k, int64_t* coll_counts) {
  int64_t rc = WL_OK, js = 0, jr = 0, jn = 0, jw = 0;
  int64_t t_min = INT64_MAX, t_max = INT64_MIN;
  uint64_t nr = (uint64_t)n_ranks;
  /* sends, receives, requests and waits: key without its tag, tag, row (each buffer is sized for n rows but only
   * the pages written are touched) */
  size_t cap = (size_t)(n ? n : 1);
  uint64_t *skey = malloc(8 * cap), *rkey = malloc(8 * cap), *nkey = malloc(8 * cap), *wkey = malloc(8 * cap);
  int32_t *stag = malloc(4 * cap), *rtag = malloc(4 * cap), *ntag = malloc(4 * cap), *wtag = malloc(4 * cap);
  int64_t *srow = malloc(8 * cap), *rrow = malloc(8 * cap), *nrow = malloc(8 * cap), *wrow = malloc(8 * cap);
  int64_t *w0 = NULL, *w1 = NULL;
  if (!skey || !rkey || !nkey || !wkey || !stag || !rtag || !ntag || !wtag || !srow || !rrow || !nrow || !wrow) {
    rc = WL_MEMORY; goto out;
  }
  /* one pass: rows in (rank, seq) order, codes, peers and communicators in range; keys; the tags' range */
  memset(coll_counts, 0, sizeof(int64_t) * (size_t)n_comms * (size_t)n_ranks);
  for (int64_t i = 0; i < n; i++) {
    if (rank[i] < 0 || rank[i] >= n_ranks || code[i] < 0 || code[i] >= n_codes) { rc = WL_FALLBACK; goto out; }
    if (i && (rank[i] < rank[i - 1] || (rank[i] == rank[i - 1] && seq[i] <= seq[i - 1]))) { rc = WL_FALLBACK; goto out; }
    uint8_t c = (uint8_t)code[i];
    match[i] = -1; done[i] = is_blocking[c] ? i : -1; coll_k[i] = -1;
    if (is_coll[c]) {
      if (comm[i] < 0 || comm[i] >= n_comms) { rc = WL_FALLBACK; goto out; }
      coll_k[i] = coll_counts[(int64_t)comm[i] * n_ranks + rank[i]]++;
    }
    int p2p = is_send[c] || is_recv[c], w = code[i] == c_wait;
    if (!p2p && !w) continue;
    if (peer[i] < 0 || peer[i] >= n_ranks) { rc = WL_FALLBACK; goto out; }
    if (tag[i] < t_min) t_min = tag[i];
    if (tag[i] > t_max) t_max = tag[i];
    uint64_t r = (uint64_t)rank[i], q = (uint64_t)peer[i];
    if (is_send[c]) { skey[js] = r * nr + q; stag[js] = tag[i]; srow[js++] = i; }
    else if (is_recv[c]) { rkey[jr] = q * nr + r; rtag[jr] = tag[i]; rrow[jr++] = i; }
    if (is_nb[c]) { nkey[jn] = (r * 2 + (c == c_irecv)) * nr + q; ntag[jn] = tag[i]; nrow[jn++] = i; }
    else if (w) { wkey[jw] = (r * 2 + (value2[i] != 0)) * nr + q; wtag[jw] = tag[i]; wrow[jw++] = i; }
  }
  int64_t n_send = js, n_recv = jr, n_nb = jn, n_wait = jw;
  if (n_send != n_recv) { rc = WL_FALLBACK; goto out; }
  if (n_send == 0) { rc = n_wait ? WL_FALLBACK : WL_OK; goto out; } /* (numpy leaves such waits without message) */
  uint64_t span = (uint64_t)(t_max - t_min) + 1;
  if (span > (1ULL << 40) || nr > (1ULL << 30) || nr * nr * span * 2 >= (1ULL << 62)) { rc = WL_FALLBACK; goto out; }
  for (int64_t j = 0; j < n_send; j++) skey[j] = skey[j] * span + (uint64_t)((int64_t)stag[j] - t_min);
  for (int64_t j = 0; j < n_recv; j++) rkey[j] = rkey[j] * span + (uint64_t)((int64_t)rtag[j] - t_min);
  for (int64_t j = 0; j < n_nb; j++) nkey[j] = nkey[j] * span + (uint64_t)((int64_t)ntag[j] - t_min);
  for (int64_t j = 0; j < n_wait; j++) wkey[j] = wkey[j] * span + (uint64_t)((int64_t)wtag[j] - t_min);
  /* messages: sends and receives each sorted stably by their channel (source, destination, tag); the j-th of each
   * is message j (numpy: the same order, numbered in its stable sort's order) */
  int bits = bits_of(nr * nr * span);
  if (radix_sort(skey, srow, n_send, bits) != WL_OK || radix_sort(rkey, rrow, n_recv, bits) != WL_OK) { rc = WL_MEMORY; goto out; }
  for (int64_t j = 0; j < n_send; j++) {
    if (skey[j] != rkey[j]) { rc = WL_FALLBACK; goto out; } /* a message without partner */
    match[srow[j]] = j; match[rrow[j]] = j;
  }
  if (n_wait) {
    /* the k-th wait of a (rank, recv?, peer, tag) takes the k-th request of it (both sorted stably by that key) */
    int gbits = bits_of(2 * nr * nr * span);
    if (radix_sort(nkey, nrow, n_nb, gbits) != WL_OK || radix_sort(wkey, wrow, n_wait, gbits) != WL_OK) { rc = WL_MEMORY; goto out; }
    int64_t n_msg = n_send;
    w0 = malloc(sizeof(int64_t) * n_msg); w1 = malloc(sizeof(int64_t) * n_msg);
    if (!w0 || !w1) { rc = WL_MEMORY; goto out; }
    for (int64_t m = 0; m < n_msg; m++) w0[m] = w1[m] = -1;
    int64_t p = 0, start = 0, k = 0;
    for (int64_t j = 0; j < n_wait; j++) {
      if (j == 0 || wkey[j] != wkey[j - 1]) {
        while (p < n_nb && nkey[p] < wkey[j]) p++;
        start = p; k = 0;
      }
      int64_t t = start + k++;
      if (t >= n_nb || nkey[t] != wkey[j]) { rc = WL_FALLBACK; goto out; } /* completes no pending request */
      int64_t i = wrow[j], m = match[nrow[t]];
      match[i] = m;
      if (w0[m] < 0) w0[m] = i;
      else if (w1[m] < 0 && rank[w0[m]] != rank[i]) w1[m] = i;
      else { rc = WL_FALLBACK; goto out; } /* two waits of one rank on one message: numpy's choice is unordered */
    }
  }
  /* completions: the request's wait (same rank, same message), else the rank's next waitall; a waitall named after
   * a call (a program's MPI_Sendrecv: isend, irecv, waitall) completes only that call's (named) requests */
  int64_t next_wa = -1, next_own_wa = -1;
  for (int64_t i = n - 1; i >= 0; i--) {
    if (i < n - 1 && rank[i] != rank[i + 1]) next_wa = next_own_wa = -1;
    if (code[i] == c_waitall) {
      next_wa = i;
      if (name[i] < 0) next_own_wa = i;
      continue;
    }
    if (!is_nb[(uint8_t)code[i]]) continue;
    int64_t m = match[i];
    if (w0 && w0[m] >= 0 && rank[w0[m]] == rank[i]) done[i] = w0[m];
    else if (w1 && w1[m] >= 0 && rank[w1[m]] == rank[i]) done[i] = w1[m];
    else done[i] = name[i] >= 0 ? next_wa : next_own_wa;
  }
out:
  free(skey); free(srow); free(rkey); free(rrow); free(nkey); free(nrow); free(wkey); free(wrow); free(w0); free(w1);
  free(stag); free(rtag); free(ntag); free(wtag);
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
