/* The in-process kernel table: lookups, single-flight insertion, waiting. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/kernel_table.h"
#include "runtime/spec.h"

static ckjit_spec make_spec(uint32_t family, int32_t a, int32_t b) {
  ckjit_spec s;
  memset(&s, 0, sizeof s);
  s.family = family;
  s.value[0] = a;
  s.value[1] = b;
  s.value[CKJIT_MAX_PARAMS - 1] = a ^ 0x5A;
  return s;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* One GPU's table, as the runtime keeps per device. */
static ckjit_kernel_table table;

static int g_unloads;
static void count_unload(ckjit_kernel *k, void *ctx) {
  assert_ptr_equal(ctx, &table);
  assert_int_equal(atomic_load(&k->state), CKJIT_ENTRY_READY);
  g_unloads++;
}

static void quiet_unload(ckjit_kernel *k, void *ctx) {
  (void)k;
  (void)ctx;
}

static int teardown(void **state) {
  (void)state;
  ckjit__memcache_clear(&table, quiet_unload, NULL);
  return 0;
}

static void test_find_after_insert(void **state) {
  (void)state;
  ckjit_spec s = make_spec(0, 1, 2);
  uint64_t h = ckjit__spec_hash(&s);
  assert_null(ckjit__memcache_find(&table, &s, h));
  int created = -1;
  ckjit_kernel *k = ckjit__memcache_insert(&table, &s, h, &created);
  assert_non_null(k);
  assert_int_equal(created, 1);
  assert_int_equal(atomic_load(&k->state), CKJIT_ENTRY_PENDING);
  assert_true(ckjit__spec_equal(&k->spec, &s));
  assert_int_equal(k->hash, h);
  assert_ptr_equal(ckjit__memcache_find(&table, &s, h), k);
  /* A second insert finds the same entry and does not create. */
  created = -1;
  assert_ptr_equal(ckjit__memcache_insert(&table, &s, h, &created), k);
  assert_int_equal(created, 0);
  /* A spec that differs in any single value is another entry. */
  for (int i = 0; i < CKJIT_MAX_PARAMS; i++) {
    ckjit_spec t = s;
    t.value[i] += 1;
    assert_null(ckjit__memcache_find(&table, &t, ckjit__spec_hash(&t)));
  }
  ckjit_spec other_family = s;
  other_family.family = 1;
  assert_null(ckjit__memcache_find(&table, &other_family, ckjit__spec_hash(&other_family)));
  k->function = (void *)0x1234;
  ckjit__memcache_publish(k, CKJIT_ENTRY_READY);
  assert_int_equal(ckjit__memcache_wait(k), CKJIT_ENTRY_READY);
  assert_ptr_equal(ckjit__memcache_find(&table, &s, h)->function, (void *)0x1234);
}

static void test_same_hash_different_specs(void **state) {
  (void)state;
  /* The caller-supplied hash collides: the table must still compare specs. */
  ckjit_spec a = make_spec(0, 10, 20), b = make_spec(0, 11, 21), c = make_spec(1, 10, 20);
  const uint64_t h = 42;
  int ca = -1, cb = -1, cc = -1;
  ckjit_kernel *ka = ckjit__memcache_insert(&table, &a, h, &ca);
  ckjit_kernel *kb = ckjit__memcache_insert(&table, &b, h, &cb);
  ckjit_kernel *kc = ckjit__memcache_insert(&table, &c, h, &cc);
  assert_non_null(ka);
  assert_non_null(kb);
  assert_non_null(kc);
  assert_int_equal(ca, 1);
  assert_int_equal(cb, 1);
  assert_int_equal(cc, 1);
  assert_true(ka != kb && kb != kc && ka != kc);
  assert_ptr_equal(ckjit__memcache_find(&table, &a, h), ka);
  assert_ptr_equal(ckjit__memcache_find(&table, &b, h), kb);
  assert_ptr_equal(ckjit__memcache_find(&table, &c, h), kc);
  ckjit__memcache_publish(ka, CKJIT_ENTRY_READY);
  ckjit__memcache_publish(kb, CKJIT_ENTRY_READY);
  ckjit__memcache_publish(kc, CKJIT_ENTRY_READY);
}

static void test_independent_specs(void **state) {
  (void)state;
  ckjit_spec a = make_spec(0, 100, 0), b = make_spec(0, 101, 0);
  uint64_t ha = ckjit__spec_hash(&a), hb = ckjit__spec_hash(&b);
  int ca, cb;
  ckjit_kernel *ka = ckjit__memcache_insert(&table, &a, ha, &ca);
  ckjit_kernel *kb = ckjit__memcache_insert(&table, &b, hb, &cb);
  assert_int_equal(ca, 1);
  assert_int_equal(cb, 1);
  /* b becomes ready while a is still being built. */
  kb->function = (void *)0xB;
  ckjit__memcache_publish(kb, CKJIT_ENTRY_READY);
  assert_int_equal(ckjit__memcache_wait(kb), CKJIT_ENTRY_READY);
  assert_int_equal(atomic_load(&ckjit__memcache_find(&table, &a, ha)->state), CKJIT_ENTRY_PENDING);
  /* a fails; its waiters see FAILED and the builder's status. */
  ka->error_status = CKJIT_ERROR_COMPILE;
  ka->error_message = NULL;
  ckjit__memcache_publish(ka, CKJIT_ENTRY_FAILED);
  assert_int_equal(ckjit__memcache_wait(ka), CKJIT_ENTRY_FAILED);
  assert_int_equal(ckjit__memcache_find(&table, &a, ha)->error_status, CKJIT_ERROR_COMPILE);
  assert_int_equal(atomic_load(&ckjit__memcache_find(&table, &b, hb)->state), CKJIT_ENTRY_READY);
}

/* ---- single flight ------------------------------------------------------ */

enum { NTHREADS = 16 };

typedef struct flight {
  ckjit_spec spec;
  uint64_t hash;
  pthread_barrier_t barrier;
  atomic_int builders;
  atomic_int ready_seen;
  atomic_int wrong;
  ckjit_kernel *entries[NTHREADS];
  int final_state;
} flight;

typedef struct flight_arg {
  flight *f;
  int index;
} flight_arg;

static void *flight_thread(void *p) {
  flight_arg *a = p;
  flight *f = a->f;
  pthread_barrier_wait(&f->barrier);
  int created = -1;
  ckjit_kernel *k = ckjit__memcache_insert(&table, &f->spec, f->hash, &created);
  f->entries[a->index] = k;
  if (!k) {
    atomic_fetch_add(&f->wrong, 1);
    return NULL;
  }
  if (created == 1) {
    atomic_fetch_add(&f->builders, 1);
    /* Build slowly, so the others really wait. */
    sleep_ms(30);
    k->function = (void *)0xF00D;
    k->module = (void *)0xBEEF;
    if (f->final_state == CKJIT_ENTRY_FAILED) k->error_status = CKJIT_ERROR_LOAD;
    ckjit__memcache_publish(k, f->final_state);
  } else if (created == 0) {
    int st = ckjit__memcache_wait(k);
    if (st != f->final_state) atomic_fetch_add(&f->wrong, 1);
    /* What the builder wrote before publishing is visible. */
    if (st == CKJIT_ENTRY_READY && (k->function != (void *)0xF00D || k->module != (void *)0xBEEF))
      atomic_fetch_add(&f->wrong, 1);
    if (st == CKJIT_ENTRY_FAILED && k->error_status != CKJIT_ERROR_LOAD) atomic_fetch_add(&f->wrong, 1);
    atomic_fetch_add(&f->ready_seen, 1);
  } else {
    atomic_fetch_add(&f->wrong, 1);
  }
  return NULL;
}

static void run_flight(int round, int final_state) {
  flight *f = calloc(1, sizeof *f);
  assert_non_null(f);
  f->spec = make_spec(1, 1000 + round, round * 3);
  f->hash = ckjit__spec_hash(&f->spec);
  f->final_state = final_state;
  pthread_barrier_init(&f->barrier, NULL, NTHREADS);
  pthread_t t[NTHREADS];
  flight_arg args[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    args[i] = (flight_arg){f, i};
    assert_int_equal(pthread_create(&t[i], NULL, flight_thread, &args[i]), 0);
  }
  for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&f->barrier);
  if (atomic_load(&f->builders) != 1)
    print_error("round %d: %d threads were told to build\n", round, atomic_load(&f->builders));
  assert_int_equal(atomic_load(&f->builders), 1);
  assert_int_equal(atomic_load(&f->wrong), 0);
  assert_int_equal(atomic_load(&f->ready_seen), NTHREADS - 1);
  for (int i = 1; i < NTHREADS; i++) assert_ptr_equal(f->entries[i], f->entries[0]);
  assert_ptr_equal(ckjit__memcache_find(&table, &f->spec, f->hash), f->entries[0]);
  assert_int_equal(atomic_load(&f->entries[0]->state), final_state);
  free(f);
}

static void test_single_flight(void **state) {
  (void)state;
  for (int round = 0; round < 20; round++) run_flight(round, CKJIT_ENTRY_READY);
  for (int round = 20; round < 25; round++) run_flight(round, CKJIT_ENTRY_FAILED);
}

/* Many threads inserting overlapping sets of distinct specs at once: each
 * spec is created exactly once. */
enum { NSPECS = 2000, NINSERTERS = 8 };
static atomic_int g_created[NSPECS];
static ckjit_kernel *_Atomic g_entry[NSPECS];
static atomic_int g_mismatch;

static void *inserter(void *p) {
  int id = (int)(intptr_t)p;
  for (int j = 0; j < NSPECS; j++) {
    int i = (j * 7 + id * 251) % NSPECS; /* a different order per thread */
    ckjit_spec s = make_spec(0, 5000 + i, -i);
    int created = -1;
    ckjit_kernel *k = ckjit__memcache_insert(&table, &s, ckjit__spec_hash(&s), &created);
    if (!k) {
      atomic_fetch_add(&g_mismatch, 1);
      continue;
    }
    if (created) {
      atomic_fetch_add(&g_created[i], 1);
      k->function = (void *)(intptr_t)(i + 1);
      ckjit__memcache_publish(k, CKJIT_ENTRY_READY);
    }
    ckjit_kernel *expected = NULL;
    if (!atomic_compare_exchange_strong(&g_entry[i], &expected, k) && expected != k)
      atomic_fetch_add(&g_mismatch, 1);
    if (ckjit__memcache_wait(k) != CKJIT_ENTRY_READY || k->function != (void *)(intptr_t)(i + 1))
      atomic_fetch_add(&g_mismatch, 1);
    /* Lock-free lookups meanwhile. */
    ckjit_kernel *found = ckjit__memcache_find(&table, &s, ckjit__spec_hash(&s));
    if (found != k) atomic_fetch_add(&g_mismatch, 1);
  }
  return NULL;
}

static void test_many_specs_concurrently(void **state) {
  (void)state;
  pthread_t t[NINSERTERS];
  for (int i = 0; i < NINSERTERS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, inserter, (void *)(intptr_t)i), 0);
  for (int i = 0; i < NINSERTERS; i++) pthread_join(t[i], NULL);
  assert_int_equal(atomic_load(&g_mismatch), 0);
  for (int i = 0; i < NSPECS; i++) {
    if (atomic_load(&g_created[i]) != 1) print_error("spec %d created %d times\n", i, atomic_load(&g_created[i]));
    assert_int_equal(atomic_load(&g_created[i]), 1);
  }
}

static void test_clear(void **state) {
  (void)state;
  ckjit__memcache_clear(&table, quiet_unload, NULL); /* entries of the tests before */
  g_unloads = 0;
  int ready = 0;
  for (int i = 0; i < 50; i++) {
    ckjit_spec s = make_spec(0, 9000 + i, 0);
    int created;
    ckjit_kernel *k = ckjit__memcache_insert(&table, &s, ckjit__spec_hash(&s), &created);
    assert_int_equal(created, 1);
    if (i % 5 == 0) {
      k->error_status = CKJIT_ERROR_COMPILE;
      k->error_message = NULL;
      ckjit__memcache_publish(k, CKJIT_ENTRY_FAILED);
    } else {
      k->function = (void *)1;
      ckjit__memcache_publish(k, CKJIT_ENTRY_READY);
      ready++;
    }
  }
  ckjit__memcache_clear(&table, count_unload, &table);
  assert_int_equal(g_unloads, ready);
  for (int i = 0; i < 50; i++) {
    ckjit_spec s = make_spec(0, 9000 + i, 0);
    assert_null(ckjit__memcache_find(&table, &s, ckjit__spec_hash(&s)));
  }
  /* Usable again after a clear. */
  ckjit_spec s = make_spec(0, 9000, 0);
  int created = 0;
  ckjit_kernel *k = ckjit__memcache_insert(&table, &s, ckjit__spec_hash(&s), &created);
  assert_non_null(k);
  assert_int_equal(created, 1);
  ckjit__memcache_publish(k, CKJIT_ENTRY_READY);
}

/* Each GPU has its own table: the same spec is a separate entry in each
 * (a module is loaded into one device's context), and clearing one leaves
 * the other. */
static void test_tables_are_independent(void **state) {
  (void)state;
  ckjit_kernel_table other;
  ckjit__memcache_init(&other);
  ckjit_spec s = make_spec(3, 77, 78);
  const uint64_t h = ckjit__spec_hash(&s);
  int c1 = 0, c2 = 0;
  ckjit_kernel *k1 = ckjit__memcache_insert(&table, &s, h, &c1);
  ckjit_kernel *k2 = ckjit__memcache_insert(&other, &s, h, &c2);
  assert_non_null(k1);
  assert_non_null(k2);
  assert_ptr_not_equal(k1, k2);
  assert_int_equal(c1 + c2, 2);
  ckjit__memcache_publish(k1, CKJIT_ENTRY_READY);
  assert_int_equal(atomic_load(&ckjit__memcache_find(&other, &s, h)->state), CKJIT_ENTRY_PENDING);
  ckjit__memcache_publish(k2, CKJIT_ENTRY_READY);
  ckjit__memcache_clear(&other, quiet_unload, NULL);
  assert_null(ckjit__memcache_find(&other, &s, h));
  assert_ptr_equal(ckjit__memcache_find(&table, &s, h), k1);
  pthread_mutex_destroy(&other.insert_lock);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_find_after_insert),
      cmocka_unit_test(test_same_hash_different_specs),
      cmocka_unit_test(test_independent_specs),
      cmocka_unit_test(test_single_flight),
      cmocka_unit_test(test_many_specs_concurrently),
      cmocka_unit_test(test_clear),
      cmocka_unit_test(test_tables_are_independent),
  };
  ckjit__memcache_init(&table);
  return cmocka_run_group_tests_name("kernel_table", tests, NULL, teardown);
}
