#include "kernel_table.h"

#include <stdlib.h>
#include <string.h>

#define BUCKETS CKJIT_KERNEL_BUCKETS

void ckjit__memcache_init(ckjit_kernel_table *t) {
  for (int i = 0; i < BUCKETS; i++) atomic_init(&t->buckets[i], NULL);
  pthread_mutex_init(&t->insert_lock, NULL);
}

static ckjit_kernel *scan(ckjit_kernel *k, const ckjit_spec *spec, uint64_t hash) {
  for (; k; k = atomic_load_explicit(&k->next, memory_order_acquire))
    if (k->hash == hash && ckjit__spec_equal(&k->spec, spec)) return k;
  return NULL;
}

ckjit_kernel *ckjit__memcache_find(ckjit_kernel_table *t, const ckjit_spec *spec, uint64_t hash) {
  return scan(atomic_load_explicit(&t->buckets[hash & (BUCKETS - 1)], memory_order_acquire), spec,
              hash);
}

ckjit_kernel *ckjit__memcache_insert(ckjit_kernel_table *t, const ckjit_spec *spec, uint64_t hash,
                                     int *created) {
  *created = 0;
  ckjit_kernel *_Atomic *bucket = &t->buckets[hash & (BUCKETS - 1)];
  pthread_mutex_lock(&t->insert_lock);
  ckjit_kernel *k = scan(atomic_load_explicit(bucket, memory_order_acquire), spec, hash);
  if (!k && (k = calloc(1, sizeof *k))) {
    k->spec = *spec;
    k->hash = hash;
    atomic_init(&k->state, CKJIT_ENTRY_PENDING);
    pthread_mutex_init(&k->mutex, NULL);
    pthread_cond_init(&k->cond, NULL);
    atomic_store_explicit(&k->next, atomic_load_explicit(bucket, memory_order_relaxed),
                          memory_order_relaxed);
    /* Release: a reader that sees the entry sees it fully initialized. */
    atomic_store_explicit(bucket, k, memory_order_release);
    *created = 1;
  }
  pthread_mutex_unlock(&t->insert_lock);
  return k;
}

void ckjit__memcache_publish(ckjit_kernel *k, int state) {
  pthread_mutex_lock(&k->mutex);
  atomic_store_explicit(&k->state, state, memory_order_release);
  pthread_cond_broadcast(&k->cond);
  pthread_mutex_unlock(&k->mutex);
}

int ckjit__memcache_wait(ckjit_kernel *k) {
  int state = atomic_load_explicit(&k->state, memory_order_acquire);
  if (state != CKJIT_ENTRY_PENDING) return state;
  pthread_mutex_lock(&k->mutex);
  while ((state = atomic_load_explicit(&k->state, memory_order_acquire)) == CKJIT_ENTRY_PENDING)
    pthread_cond_wait(&k->cond, &k->mutex);
  pthread_mutex_unlock(&k->mutex);
  return state;
}

void ckjit__memcache_clear(ckjit_kernel_table *t, void (*unload)(ckjit_kernel *k, void *ctx), void *ctx) {
  pthread_mutex_lock(&t->insert_lock);
  for (int i = 0; i < BUCKETS; i++) {
    ckjit_kernel *k = atomic_exchange(&t->buckets[i], NULL);
    while (k) {
      ckjit_kernel *next = atomic_load(&k->next);
      if (unload && atomic_load(&k->state) == CKJIT_ENTRY_READY) unload(k, ctx);
      pthread_mutex_destroy(&k->mutex);
      pthread_cond_destroy(&k->cond);
      free(k->error_message);
      free(k);
      k = next;
    }
  }
  pthread_mutex_unlock(&t->insert_lock);
}
