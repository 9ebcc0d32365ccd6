/* The wgmma GEMM's walk in clusters (kernel_src/gemm/persistent_units.h:
 * unit_of and cluster_tile_of, with CLUSTER_M x CLUSTER_N blocks a cluster;
 * the grid of runtime/ops/gemm/run.c), restated and walked on many
 * (tiles, splits, batches, multiprocessors): every tile of D, of every K
 * slice and batch entry, is stored exactly once; the blocks that share A's
 * tile (one tile row) or B's (one tile column) are on the same unit with the
 * same tile row or column, so one multicast serves them; a block on a tile
 * past D's edge only exists where the tile count is odd, and its clamped
 * load coordinates are D's last tile.  Each block of a cluster walks as many
 * units as the others (their K-step rings stay in step). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define GROUP_M 16 /* kernel_src/gemm/problem.h */

typedef struct walk {
  long long tiles_m, tiles_n, splits, batch;
  int cm, cn; /* CLUSTER_M, CLUSTER_N */
} walk;

typedef struct tile {
  long long batch, slice, tm, tn;
} tile;

static long long ceil_div(long long a, long long b) { return (a + b - 1) / b; }

/* cluster_units */
static long long units_of(const walk *w) {
  return ceil_div(w->tiles_m, w->cm) * ceil_div(w->tiles_n, w->cn) * w->splits * w->batch;
}

/* cluster_tile_of, for the block of rank `rank` in its cluster */
static tile tile_of(const walk *w, long long q, int rank) {
  const long long cm = ceil_div(w->tiles_m, w->cm), cn = ceil_div(w->tiles_n, w->cn);
  const long long per_mat = cm * cn, per_batch = per_mat * w->splits;
  tile t;
  t.batch = q / per_batch;
  q -= t.batch * per_batch;
  t.slice = q / per_mat;
  q -= t.slice * per_mat;
  const long long g_rows = GROUP_M / w->cm, group = q / (g_rows * cn), first = group * g_rows;
  const long long rows = cm - first < g_rows ? cm - first : g_rows, in_group = q - group * g_rows * cn;
  t.tm = (first + in_group % rows) * w->cm + rank % w->cm;
  t.tn = (in_group / rows) * w->cn + rank / w->cm;
  return t;
}

static void check_walk(const walk *w, long long sms) {
  const long long cluster = w->cm * w->cn, units = units_of(w);
  /* run.c: one cluster per unit at most, whole clusters on the GPU */
  const long long grid = (units < sms / cluster ? units : sms / cluster) * cluster;
  assert_true(grid >= cluster && grid % cluster == 0 && grid <= sms);
  const long long n = w->batch * w->splits * w->tiles_m * w->tiles_n;
  unsigned char *stored = calloc((size_t)n, 1);
  assert_non_null(stored);
  for (long long c = 0; c < grid / cluster; c++) {
    for (long long q = c; q < units; q += grid / cluster) { /* unit_of: the cluster's units */
      tile t[4];
      for (int r = 0; r < cluster; r++) {
        t[r] = tile_of(w, q, r);
        assert_true(t[r].batch < w->batch && t[r].slice < w->splits);
        assert_true(t[r].tm < ceil_div(w->tiles_m, w->cm) * w->cm && t[r].tn < ceil_div(w->tiles_n, w->cn) * w->cn);
        const int past = t[r].tm >= w->tiles_m || t[r].tn >= w->tiles_n; /* !tile_stored */
        if (past) { /* only at an edge with an odd count; loads clamp to D's last tile */
          assert_true((t[r].tm >= w->tiles_m && w->tiles_m % w->cm) || (t[r].tn >= w->tiles_n && w->tiles_n % w->cn));
          continue;
        }
        const long long i = ((t[r].batch * w->splits + t[r].slice) * w->tiles_m + t[r].tm) * w->tiles_n + t[r].tn;
        assert_int_equal(stored[i], 0);
        stored[i] = 1;
      }
      for (int r = 0; r < cluster; r++) {
        assert_true(t[r].batch == t[0].batch && t[r].slice == t[0].slice); /* one K range */
        const int a_partner = r ^ w->cm, b_partner = r ^ 1; /* tma_pipeline.h's hand_back */
        if (w->cn > 1) assert_int_equal(t[r].tm, t[a_partner].tm); /* A's tile: one row */
        if (w->cm > 1) assert_int_equal(t[r].tn, t[b_partner].tn); /* B's tile: one column */
      }
    }
  }
  for (long long i = 0; i < n; i++) assert_int_equal(stored[i], 1);
  free(stored);
}

static void test_every_tile_once(void **state) {
  (void)state;
  static const int shapes[][2] = {{2, 1}, {1, 2}, {2, 2}};
  static const long long sms[] = {2, 8, 132};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (size_t g = 0; g < sizeof sms / sizeof sms[0]; g++)
      for (long long tm = 1; tm <= 37; tm += tm < 20 ? 1 : 8)
        for (long long tn = 1; tn <= 37; tn += tn < 20 ? 1 : 8)
          for (long long splits = 1; splits <= 3; splits += 2)
            for (long long batch = 1; batch <= 2; batch++) {
              const walk w = {tm, tn, splits, batch, shapes[s][0], shapes[s][1]};
              if (sms[g] >= w.cm * w.cn) check_walk(&w, sms[g]);
            }
}

/* The shapes the GPU test and the benchmarks run: 128x4096x4096 in 64 x 64
 * tiles (2 x 64), 4096^3 in 128 x 256 (32 x 16), 2176 rows in 128 (17, odd). */
static void test_shapes(void **state) {
  (void)state;
  const walk skinny = {2, 64, 1, 1, 2, 1}, big = {32, 16, 1, 1, 1, 2}, odd = {17, 10, 1, 1, 2, 1};
  assert_int_equal(units_of(&skinny), 64);
  check_walk(&skinny, 132);
  assert_int_equal(units_of(&big), 256);
  check_walk(&big, 132);
  assert_int_equal(units_of(&odd), 90);
  check_walk(&odd, 132);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_tile_once),
      cmocka_unit_test(test_shapes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
