/* In-memory code objects by cache key: a chained hash table under one mutex
 * plus a least-recently-used list.  Requests reach it only on a disk miss
 * (a compile is milliseconds to seconds), so one lock costs nothing worth
 * avoiding. */
#include "code_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../cache/disk_cache.h" /* the default bounds */

#define BUCKETS 4096 /* power of two; keys are uniform hashes */

typedef struct code_entry {
  ckjit_key key;
  char *data; /* NULL while building */
  size_t size;
  int building;
  struct code_entry *chain;         /* next in the bucket */
  struct code_entry *older, *newer; /* recency list of built entries */
} code_entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t built = PTHREAD_COND_INITIALIZER;
static code_entry *buckets[BUCKETS];
static code_entry *newest, *oldest;
static uint64_t total_bytes, total_entries;

static code_entry **slot_of(const ckjit_key *key) {
  uint32_t h;
  memcpy(&h, key->bytes, sizeof h);
  code_entry **p = &buckets[h & (BUCKETS - 1)];
  while (*p && memcmp((*p)->key.bytes, key->bytes, sizeof key->bytes)) p = &(*p)->chain;
  return p;
}

static void unlink_recency(code_entry *e) {
  if (e->older) e->older->newer = e->newer;
  else oldest = e->newer;
  if (e->newer) e->newer->older = e->older;
  else newest = e->older;
  e->older = e->newer = NULL;
}

static void link_newest(code_entry *e) {
  e->older = newest;
  e->newer = NULL;
  if (newest) newest->newer = e;
  else oldest = e;
  newest = e;
}

/* Unlinks a built entry from everything and frees it. */
static void drop(code_entry *e) {
  code_entry **p = slot_of(&e->key);
  if (*p == e) *p = e->chain;
  if (!e->building) {
    unlink_recency(e);
    total_bytes -= e->size;
    total_entries--;
  }
  free(e->data);
  free(e);
}

ckjit_code_claim ckjit__code_cache_claim(const ckjit_key *key, ckjit_buffer *code) {
  memset(code, 0, sizeof *code);
  pthread_mutex_lock(&lock);
  for (;;) {
    code_entry **p = slot_of(key);
    code_entry *e = *p;
    if (!e) {
      e = calloc(1, sizeof *e);
      if (e) {
        e->key = *key;
        e->building = 1;
        *p = e;
      }
      pthread_mutex_unlock(&lock);
      return e ? CKJIT_CODE_BUILD : CKJIT_CODE_NO_MEMORY;
    }
    if (e->building) {
      pthread_cond_wait(&built, &lock);
      continue; /* built, or abandoned: look again */
    }
    code->data = malloc(e->size ? e->size : 1);
    if (code->data) {
      memcpy(code->data, e->data, e->size);
      code->size = code->cap = e->size;
      unlink_recency(e);
      link_newest(e);
    }
    pthread_mutex_unlock(&lock);
    return code->data ? CKJIT_CODE_HIT : CKJIT_CODE_NO_MEMORY;
  }
}

void ckjit__code_cache_put(const ckjit_key *key, const void *code, size_t size, uint64_t max_bytes,
                           uint64_t max_entries) {
  if (!max_bytes) max_bytes = CKJIT_DISK_DEFAULT_MAX_BYTES;
  if (!max_entries) max_entries = CKJIT_DISK_DEFAULT_MAX_ENTRIES;
  char *copy = malloc(size ? size : 1);
  if (copy) memcpy(copy, code, size);
  pthread_mutex_lock(&lock);
  code_entry *e = *slot_of(key);
  if (e && e->building) {
    if (!copy) {
      drop(e); /* kept nowhere: the next request builds it again */
    } else {
      e->data = copy;
      e->size = size;
      e->building = 0;
      link_newest(e);
      total_bytes += size;
      total_entries++;
      copy = NULL;
      /* The newest stays even when it alone exceeds a bound. */
      while ((total_bytes > max_bytes || total_entries > max_entries) && oldest != e) drop(oldest);
    }
  }
  pthread_cond_broadcast(&built);
  pthread_mutex_unlock(&lock);
  free(copy);
}

void ckjit__code_cache_abandon(const ckjit_key *key) {
  pthread_mutex_lock(&lock);
  code_entry *e = *slot_of(key);
  if (e && e->building) drop(e);
  pthread_cond_broadcast(&built);
  pthread_mutex_unlock(&lock);
}

void ckjit__code_cache_clear(void) {
  pthread_mutex_lock(&lock);
  for (size_t b = 0; b < BUCKETS; b++)
    while (buckets[b]) drop(buckets[b]);
  pthread_mutex_unlock(&lock);
}
