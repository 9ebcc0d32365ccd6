/* In-process table of loaded kernels, keyed by the compact spec tuple.
 *
 * Lookups are lock-free: buckets are singly linked lists whose heads are
 * atomic pointers; entries are only ever prepended (under a mutex) and are
 * freed at shutdown.  A new entry starts PENDING and is built by the thread
 * that inserted it (single flight); other threads wait on the entry. */
#ifndef CKJIT_RUNTIME_KERNEL_TABLE_H
#define CKJIT_RUNTIME_KERNEL_TABLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include "spec.h"

enum { CKJIT_ENTRY_PENDING = 0, CKJIT_ENTRY_READY = 1, CKJIT_ENTRY_FAILED = 2 };

typedef struct ckjit_kernel {
  ckjit_spec spec;
  uint64_t hash;
  _Atomic int state;
  void *function; /* valid once READY */
  void *module;
  ckjit_status error_status; /* FAILED: the builder's status and message */
  char *error_message;
  pthread_mutex_t mutex; /* guards waiting on `state` changes */
  pthread_cond_t cond;
  struct ckjit_kernel *_Atomic next;
} ckjit_kernel;

#define CKJIT_KERNEL_BUCKETS 1024 /* power of two; chains stay short for any realistic spec count */

/* One GPU's loaded kernels (each GPU has its own: a module is loaded into
 * one device's context). */
typedef struct ckjit_kernel_table {
  ckjit_kernel *_Atomic buckets[CKJIT_KERNEL_BUCKETS];
  pthread_mutex_t insert_lock;
} ckjit_kernel_table;

void ckjit__memcache_init(ckjit_kernel_table *t);

/* Lock-free lookup; NULL when absent.  No allocation, no lock. */
ckjit_kernel *ckjit__memcache_find(ckjit_kernel_table *t, const ckjit_spec *spec, uint64_t hash);

/* Returns the entry for `spec`, inserting a PENDING one if absent; `*created`
 * is 1 when the caller inserted it and must build it.  NULL when out of memory. */
ckjit_kernel *ckjit__memcache_insert(ckjit_kernel_table *t, const ckjit_spec *spec, uint64_t hash,
                                     int *created);

/* Publishes a build result and wakes the waiters. */
void ckjit__memcache_publish(ckjit_kernel *k, int state);

/* Waits while `k` is PENDING; returns its final state. */
int ckjit__memcache_wait(ckjit_kernel *k);

/* Removes every entry, calling `unload(k, ctx)` on each READY one. */
void ckjit__memcache_clear(ckjit_kernel_table *t, void (*unload)(ckjit_kernel *k, void *ctx), void *ctx);

#endif
