/* Message matching, request completions and collective instances of an operation table in a few linear passes
 * (issue 25: waitlab's own work around a program run).  Used by simulator/native_matching.py through ctypes; built
 * with the system C compiler.  The numpy versions (simulator/matching.py match_messages and completions,
 * simulator/timeline.py collective_instances) stay the reference: every result here is theirs, row for row.
 *
 * wl_links: message ids (sends and receives each sorted stably by (source, destination, tag) with a radix sort: the
 * j-th of each is message j, as numpy's stable sort numbers them), the request each wait completes (matching.py
 * request_pairs: per (rank, source, destination, tag) the oldest request still pending; the rank's own waitalls
 * complete the pending requests but those its later waits need, per key the oldest ones), the waits' ids (their
 * requests'), the completing row of every request (its wait, else the rank's next waitall) and, per collective row,
 * its count k among the earlier collectives of its (communicator, rank) plus the counts per (communicator, rank).
 * wl_instances: instance = offset[comm] + k, checking that every member of an instance calls the same collective.
 *
 * Anything the numpy versions would reject or order in a way this pass does not reproduce (rows out of (rank, seq)
 * order, peers outside the world, unmatched messages, waits without request, mixed collectives) returns WL_FALLBACK:
 * the caller then runs the numpy versions, which raise their own message.  (Stock `test` rows naming a request, and
 * waits named after a call whose requests they complete, go to numpy before: native_matching.py.)
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

/* The waits and requests of one key (rows kr[s..e), in row order; typ 1 a wait, 0 a request; ep the epoch: the count
 * of the rank's own waitalls before the row), paired as matching.py request_pairs pairs them.  Per epoch group: its
 * requests (a), waits (b), the key's balance (waits - requests) before it and its highest balance in it; bottom up,
 * need = what the group needs left pending by the waitall before it (a suffix maximum); the newest need + a - b -
 * (the next group's need) requests of the group go to the waitall after it, and the j-th wait of the key takes the
 * j-th request left.  WL_FALLBACK when a wait has no request posted before it (numpy names it). */
static int pair_key(const int64_t* kr, const uint8_t* typ, const int64_t* ep, int64_t s, int64_t e, int64_t* g_first,
                    int64_t* g_before, int64_t* g_top, int64_t* g_a, int64_t* g_b, uint8_t* gone, int64_t* match,
                    int64_t* done) {
  int64_t run = 0, ng = 0;
  for (int64_t j = s; j < e; j++) {
    if (j == s || ep[j] != ep[j - 1]) {
      g_first[ng] = j; g_before[ng] = g_top[ng] = run; g_a[ng] = g_b[ng] = 0; ng++;
    }
    run += typ[j] ? 1 : -1;
    if (typ[j] && run > 0) return WL_FALLBACK;
    if (run > g_top[ng - 1]) g_top[ng - 1] = run;
    if (typ[j]) g_b[ng - 1]++; else g_a[ng - 1]++;
  }
  int64_t top = INT64_MIN, need_next = 0;
  for (int64_t g = ng - 1; g >= 0; g--) {
    if (g_top[g] > top) top = g_top[g];
    int64_t need = top - g_before[g], removed = need + g_a[g] - g_b[g] - need_next;
    for (int64_t j = (g + 1 < ng ? g_first[g + 1] : e) - 1; j >= g_first[g]; j--) {
      gone[j] = !typ[j] && removed > 0;
      removed -= gone[j];
    }
    need_next = need;
  }
  for (int64_t j = s, p = s; j < e; j++) {
    if (!typ[j]) continue;
    while (typ[p] || gone[p]) p++; /* the oldest request left to the waits (balance <= 0: there is one) */
    match[kr[j]] = match[kr[p]];
    done[kr[p]] = kr[j];
    p++;
  }
  return WL_OK;
}

int64_t wl_links(const int8_t* code, const int32_t* rank, const int32_t* seq, const int32_t* peer, const int32_t* tag,
                 const double* value2, const int32_t* comm, const int32_t* name, int64_t n, int32_t n_ranks, int32_t n_comms, int32_t n_codes,
                 const uint8_t* is_send, const uint8_t* is_recv, const uint8_t* is_nb, const uint8_t* is_blocking,
                 const uint8_t* is_coll, int32_t c_wait, int32_t c_waitall, int32_t c_irecv,
                 int64_t* match, int64_t* done, int64_t* coll_k, int64_t* coll_counts) {
  int64_t rc = WL_OK, js = 0, jr = 0, jk = 0, n_wait = 0, epoch = 0;
  int64_t t_min = INT64_MAX, t_max = INT64_MIN;
  uint64_t nr = (uint64_t)n_ranks;
  /* sends, receives, and requests with waits: key without its tag, tag, row (each buffer is sized for n rows but only
   * the pages written are touched); per request or wait its epoch */
  size_t cap = (size_t)(n ? n : 1);
  uint64_t *skey = malloc(8 * cap), *rkey = malloc(8 * cap), *kkey = malloc(8 * cap);
  int32_t *stag = malloc(4 * cap), *rtag = malloc(4 * cap), *ktag = malloc(4 * cap);
  int64_t *srow = malloc(8 * cap), *rrow = malloc(8 * cap), *krow = malloc(8 * cap), *kep = malloc(8 * cap);
  int64_t *g_first = NULL, *g_before = NULL, *g_top = NULL, *g_a = NULL, *g_b = NULL;
  uint8_t *ktyp = NULL, *gone = NULL;
  if (!skey || !rkey || !kkey || !stag || !rtag || !ktag || !srow || !rrow || !krow || !kep) {
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
    if (code[i] == c_waitall && name[i] < 0) epoch++; /* the program's own waitall (not a sendrecv's) */
    int p2p = is_send[c] || is_recv[c], w = code[i] == c_wait;
    if (!p2p && !w) continue;
    if (peer[i] < 0 || peer[i] >= n_ranks) { rc = WL_FALLBACK; goto out; }
    if (tag[i] < t_min) t_min = tag[i];
    if (tag[i] > t_max) t_max = tag[i];
    uint64_t r = (uint64_t)rank[i], q = (uint64_t)peer[i];
    if (is_send[c]) { skey[js] = r * nr + q; stag[js] = tag[i]; srow[js++] = i; }
    else if (is_recv[c]) { rkey[jr] = q * nr + r; rtag[jr] = tag[i]; rrow[jr++] = i; }
    if (is_nb[c] || w) {
      /* (rank, source, destination, named after a call?): a self-message's isend and irecv share their key */
      int recv = w ? value2[i] != 0 : c == c_irecv;
      kkey[jk] = (((r * nr + q) * 2 + (uint64_t)(recv && q != r)) * 2 + (uint64_t)(!w && name[i] >= 0));
      ktag[jk] = tag[i]; kep[jk] = epoch; krow[jk++] = i;
      n_wait += w;
    }
  }
  int64_t n_send = js, n_recv = jr, n_k = jk;
  if (n_send != n_recv) { rc = WL_FALLBACK; goto out; }
  if (n_send == 0) { rc = n_wait ? WL_FALLBACK : WL_OK; goto out; } /* (numpy leaves such waits without message) */
  uint64_t span = (uint64_t)(t_max - t_min) + 1;
  if (span > (1ULL << 40) || nr > (1ULL << 30) || nr * nr >= (1ULL << 60) / span) { rc = WL_FALLBACK; goto out; }
  for (int64_t j = 0; j < n_send; j++) skey[j] = skey[j] * span + (uint64_t)((int64_t)stag[j] - t_min);
  for (int64_t j = 0; j < n_recv; j++) rkey[j] = rkey[j] * span + (uint64_t)((int64_t)rtag[j] - t_min);
  for (int64_t j = 0; j < n_k; j++) kkey[j] = kkey[j] * span + (uint64_t)((int64_t)ktag[j] - t_min);
  /* messages: sends and receives each sorted stably by their channel (source, destination, tag); the j-th of each
   * is message j (numpy: the same order, numbered in its stable sort's order) */
  int bits = bits_of(nr * nr * span);
  if (radix_sort(skey, srow, n_send, bits) != WL_OK || radix_sort(rkey, rrow, n_recv, bits) != WL_OK) { rc = WL_MEMORY; goto out; }
  for (int64_t j = 0; j < n_send; j++) {
    if (skey[j] != rkey[j]) { rc = WL_FALLBACK; goto out; } /* a message without partner */
    match[srow[j]] = j; match[rrow[j]] = j;
  }
  if (n_wait) {
    /* requests and waits sorted stably by key: each key's rows in row order, their epochs with them */
    int64_t* pos = malloc(8 * (size_t)n_k);
    int64_t* tmp = malloc(8 * (size_t)n_k);
    if (!pos || !tmp) { free(pos); free(tmp); rc = WL_MEMORY; goto out; }
    for (int64_t j = 0; j < n_k; j++) pos[j] = j;
    if (radix_sort(kkey, pos, n_k, bits_of(4 * nr * nr * span)) != WL_OK) { free(pos); free(tmp); rc = WL_MEMORY; goto out; }
    for (int64_t j = 0; j < n_k; j++) tmp[j] = krow[pos[j]];
    memcpy(krow, tmp, 8 * (size_t)n_k);
    for (int64_t j = 0; j < n_k; j++) tmp[j] = kep[pos[j]];
    memcpy(kep, tmp, 8 * (size_t)n_k);
    free(pos); free(tmp);
    ktyp = malloc((size_t)n_k); gone = malloc((size_t)n_k);
    g_first = malloc(8 * (size_t)n_k); g_before = malloc(8 * (size_t)n_k); g_top = malloc(8 * (size_t)n_k);
    g_a = malloc(8 * (size_t)n_k); g_b = malloc(8 * (size_t)n_k);
    if (!ktyp || !gone || !g_first || !g_before || !g_top || !g_a || !g_b) { rc = WL_MEMORY; goto out; }
    for (int64_t j = 0; j < n_k; j++) ktyp[j] = code[krow[j]] == c_wait;
    for (int64_t s = 0, e; s < n_k; s = e) {
      for (e = s + 1; e < n_k && kkey[e] == kkey[s];) e++;
      int has_wait = 0;
      for (int64_t j = s; j < e && !has_wait; j++) has_wait = ktyp[j];
      if (has_wait && pair_key(krow, ktyp, kep, s, e, g_first, g_before, g_top, g_a, g_b, gone, match, done) != WL_OK) {
        rc = WL_FALLBACK; goto out;
      }
    }
  }
  /* completions: the request's wait (set above), else the rank's next waitall; a waitall named after a call (a
   * program's MPI_Sendrecv: isend, irecv, waitall) completes only that call's (named) requests */
  int64_t next_wa = -1, next_own_wa = -1;
  for (int64_t i = n - 1; i >= 0; i--) {
    if (i < n - 1 && rank[i] != rank[i + 1]) next_wa = next_own_wa = -1;
    if (code[i] == c_waitall) {
      next_wa = i;
      if (name[i] < 0) next_own_wa = i;
      continue;
    }
    if (!is_nb[(uint8_t)code[i]] || done[i] >= 0) continue;
    done[i] = name[i] >= 0 ? next_wa : next_own_wa;
  }
out:
  free(skey); free(srow); free(rkey); free(rrow); free(kkey); free(krow); free(kep); free(stag); free(rtag); free(ktag);
  free(ktyp); free(gone); free(g_first); free(g_before); free(g_top); free(g_a); free(g_b);
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
