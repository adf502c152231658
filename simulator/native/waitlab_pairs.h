/* An open-addressing table of (a, b) pairs -> id, ids in order of insertion (the records' call-site pairs and the
 * call paths of native/waitlab_records.c, the call paths of native/waitlab_events.c).  Static functions: each
 * library that includes it has its own copy. */
#ifndef WAITLAB_PAIRS_H
#define WAITLAB_PAIRS_H

#include <stdint.h>
#include <stdlib.h>

#define ERR_MEMORY_PAIRS (-2) /* what pairs_init and pairs_get return when out of memory */

typedef struct { uint64_t *a, *b; int64_t *id; int64_t cap, n; } Pairs;

static uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t h = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
  h ^= h >> 33; h *= 0xFF51AFD7ED558CCDULL; h ^= h >> 33;
  return h;
}

static int pairs_init(Pairs* p, int64_t cap) {
  p->cap = cap; p->n = 0;
  p->a = malloc(sizeof(uint64_t) * cap); p->b = malloc(sizeof(uint64_t) * cap); p->id = malloc(sizeof(int64_t) * cap);
  if (!p->a || !p->b || !p->id) return ERR_MEMORY_PAIRS;
  for (int64_t i = 0; i < cap; i++) p->id[i] = -1;
  return 0;
}

static void pairs_free(Pairs* p) { free(p->a); free(p->b); free(p->id); }

static int64_t pairs_find(const Pairs* p, uint64_t a, uint64_t b) { /* slot of (a, b) or of the empty slot for it */
  int64_t s = (int64_t)(mix(a, b) & (uint64_t)(p->cap - 1));
  while (p->id[s] >= 0 && !(p->a[s] == a && p->b[s] == b)) s = (s + 1) & (p->cap - 1);
  return s;
}

/* id of (a, b), inserted with the next id if new; ERR_MEMORY_PAIRS if the table could not grow */
static int64_t pairs_get(Pairs* p, uint64_t a, uint64_t b) {
  int64_t s = pairs_find(p, a, b);
  if (p->id[s] >= 0) return p->id[s];
  if (2 * (p->n + 1) > p->cap) { /* keep the load under 1/2 */
    Pairs q;
    if (pairs_init(&q, 2 * p->cap) < 0) { pairs_free(&q); return ERR_MEMORY_PAIRS; }
    for (int64_t i = 0; i < p->cap; i++)
      if (p->id[i] >= 0) {
        int64_t t = pairs_find(&q, p->a[i], p->b[i]);
        q.a[t] = p->a[i]; q.b[t] = p->b[i]; q.id[t] = p->id[i];
      }
    q.n = p->n;
    pairs_free(p);
    *p = q;
    s = pairs_find(p, a, b);
  }
  p->a[s] = a; p->b[s] = b; p->id[s] = p->n;
  return p->n++;
}

#endif
