/* The Stream-K split (runtime/ops/gemm/streamk.c) on many (tiles, K steps,
 * multiprocessors): walking it the way the kernels do (unit_of in
 * kernel_src/gemm/persistent_units.h; the fixup in kernel_src/gemm/reduce.cu), every K step of
 * every tile is computed exactly once, by whole-tile units for the first
 * dp_tiles and by runs for the rest; each Stream-K tile's runs land in
 * distinct slots below `slots` (the workspace bound), in block order; the
 * runs are balanced (lengths differ by at most one) and the grid never
 * exceeds the multiprocessors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/ops/gemm/streamk.h"

/* The kernels' sk_owner (kernel_src/gemm/problem.h), restated: the block
 * whose run holds Stream-K step i. */
static long long owner(const ckjit_streamk *s, long long i) {
  const long long big = s->extra * (s->base + 1);
  return i < big ? i / (s->base + 1) : s->extra + (i - big) / s->base;
}

/* The kernel's unit walk, restated: unit u of block b. */
typedef struct work {
  long long tile, slot, kt0, kt1; /* kt1 -1: the whole tile */
} work;

static int unit_of(const ckjit_streamk *s, long long b, long long grid, long long u, work *w) {
  const long long whole = s->dp_tiles > b ? (s->dp_tiles - b + grid - 1) / grid : 0;
  w->slot = -1, w->kt0 = 0, w->kt1 = -1;
  if (u < whole) {
    w->tile = b + u * grid;
    return 1;
  }
  if (s->sk_tiles == 0) return 0;
  const long long r0 = b * s->base + (b < s->extra ? b : s->extra);
  const long long r1 = r0 + s->base + (b < s->extra ? 1 : 0);
  const long long tr = r0 / s->iters + (u - whole), first = tr * s->iters;
  const long long start = r0 > first ? r0 : first;
  const long long end = r1 < first + s->iters ? r1 : first + s->iters;
  if (start >= end) return 0;
  w->tile = s->dp_tiles + tr, w->kt0 = start - first, w->kt1 = end - first;
  w->slot = tr * s->slots + (b - owner(s, first));
  return 1;
}

static void check_split(long long tiles, long long iters, long long sms) {
  ckjit_streamk s;
  const long long grid = ckjit__gemm_plan_streamk(tiles, iters, sms, &s);
  assert_true(grid >= 1 && grid <= sms);
  assert_int_equal(s.dp_tiles + s.sk_tiles, tiles);
  assert_int_equal(s.iters, iters);
  assert_int_equal(s.base * grid + s.extra, s.sk_tiles * iters);
  assert_true(s.extra < grid && s.base >= 1);
  assert_true(s.dp_tiles % grid == 0); /* whole waves only */
  unsigned char *steps = calloc((size_t)(tiles * iters), 1);
  unsigned char *slot_used = calloc((size_t)(s.sk_tiles * s.slots + 1), 1);
  assert_non_null(steps);
  assert_non_null(slot_used);
  for (long long b = 0; b < grid; b++) {
    long long run = 0, last_slot_tile = -1;
    work w;
    for (long long u = 0; unit_of(&s, b, grid, u, &w); u++) {
      assert_true(w.tile >= 0 && w.tile < tiles);
      const long long k0 = w.kt0, k1 = w.kt1 < 0 ? iters : w.kt1;
      assert_true(k0 < k1 && k1 <= iters);
      assert_int_equal(w.slot < 0, w.tile < s.dp_tiles);
      for (long long k = k0; k < k1; k++) steps[w.tile * iters + k]++;
      if (w.slot >= 0) {
        const long long tr = w.tile - s.dp_tiles;
        assert_true(w.slot >= tr * s.slots && w.slot < (tr + 1) * s.slots);
        assert_int_equal(slot_used[w.slot], 0);
        slot_used[w.slot] = 1;
        assert_true(tr > last_slot_tile); /* runs walk their tiles in order */
        last_slot_tile = tr;
        run += k1 - k0;
      }
    }
    assert_int_equal(run, s.base + (b < s.extra)); /* balanced runs */
  }
  for (long long i = 0; i < tiles * iters; i++) assert_int_equal(steps[i], 1);
  /* The fixup sums slots 0 .. owner(last) - owner(first) of each tile: all
   * written, none past them. */
  for (long long tr = 0; tr < s.sk_tiles; tr++) {
    const long long first = owner(&s, tr * iters);
    const long long last = owner(&s, (tr + 1) * iters - 1);
    assert_true(last - first + 1 <= s.slots);
    for (long long sl = 0; sl < s.slots; sl++)
      assert_int_equal(slot_used[tr * s.slots + sl], sl <= last - first);
  }
  free(steps);
  free(slot_used);
}

static void test_splits_cover_every_step_once(void **state) {
  (void)state;
  static const long long sms[] = {1, 2, 7, 108, 132};
  static const long long iters[] = {1, 2, 3, 7, 8, 16, 63, 64, 128, 1000};
  for (size_t a = 0; a < sizeof sms / sizeof sms[0]; a++)
    for (size_t b = 0; b < sizeof iters / sizeof iters[0]; b++)
      for (long long tiles = 1; tiles <= 3 * sms[a] + 5; tiles += tiles < 40 ? 1 : 17) {
        check_split(tiles, iters[b], sms[a]);
      }
}

static void test_shapes(void **state) {
  (void)state;
  ckjit_streamk s;
  /* Under-filled: 1024^3 in 128 x 128 tiles: all tiles in runs. */
  assert_int_equal(ckjit__gemm_plan_streamk(64, 16, 132, &s), 132);
  assert_int_equal(s.dp_tiles, 0);
  assert_int_equal(s.base, 7);
  assert_int_equal(s.slots, 4);
  /* A tail wave: the last full wave and the partial one share runs. */
  assert_int_equal(ckjit__gemm_plan_streamk(288, 8, 132, &s), 132);
  assert_int_equal(s.dp_tiles, 132);
  assert_int_equal(s.sk_tiles, 156);
  /* Few K steps in all: fewer blocks, each with at least 4. */
  assert_int_equal(ckjit__gemm_plan_streamk(2, 10, 132, &s), 5);
  assert_int_equal(ckjit__gemm_plan_streamk(1, 1, 132, &s), 1);
  assert_int_equal(ckjit__gemm_plan_streamk(0, 16, 132, &s), 0);
  assert_int_equal(ckjit__gemm_plan_streamk(4, 0, 132, &s), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_splits_cover_every_step_once),
      cmocka_unit_test(test_shapes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
