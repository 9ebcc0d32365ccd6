/* GPU suite for ckjit_moe_sort (ckjit/moe.h) against a host stable
 * counting sort of the same routing: every output must match exactly
 * (sorted ids in entry order within each expert, padding and tail
 * sentinels, offsets, counts, tile experts, the total and the invalid
 * count), and the topk_ids must come back unchanged.
 *
 * Routings: uniform top-k (distinct experts per token), every entry on one
 * expert, a few hot experts, ids out of range (-1, experts, a large one:
 * left out and counted as invalid); tokens 0, 1, 7, 16 and 16384; k 1, 2,
 * 8 and 16; experts 8, 64, 256, 512 and 1024; tile_m 128, 64 and 1; int32
 * and int64 ids; expert parallelism (an expert_map from global to local
 * experts, -1 for experts held elsewhere, and in one case map entries out
 * of range).  The outputs start as 0x7F bytes, so a value the op should
 * write and did not shows.  Runs wherever there is a GPU (the op is
 * portable); skipped with the reason otherwise. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"

enum { UNIFORM, ONE_EXPERT, HOT, WITH_INVALID };
static const char *const routing_names[] = {"uniform", "one expert", "hot experts", "with invalid ids"};

typedef struct scase {
  int64_t tokens;
  int k, experts, tile_m, routing;
  ckjit_dtype ids;
  int global; /* > 0: ids name this many global experts through an expert map */
} scase;

/* The experts the ids name: global ones under a map. */
static int id_range(const scase *c) { return c->global ? c->global : c->experts; }

/* A map of c->global experts: a third held elsewhere (-1), the rest spread
 * over the local experts; WITH_INVALID also maps a few outside -1 ..
 * experts - 1. */
static void make_map(const scase *c, int32_t *map, tu_rng *r) {
  for (int g = 0; g < c->global; g++) {
    map[g] = tu_rng_range(r, 0, 2) == 0 ? -1 : (int32_t)tu_rng_range(r, 0, c->experts - 1);
    if (c->routing == WITH_INVALID && tu_rng_range(r, 0, 15) == 0) map[g] = g % 2 ? c->experts : -2;
  }
}

/* The header's rule: the local expert of an id, -1 elsewhere, -2 invalid. */
static int64_t local_of(const scase *c, const int32_t *map, int64_t id) {
  if (!c->global) return id >= 0 && id < c->experts ? id : -2;
  if (id < 0 || id >= c->global) return -2;
  return map[id] >= -1 && map[id] < c->experts ? map[id] : -2;
}

/* The routing's ids (entry t * k + s). */
static void route(const scase *c, int64_t *ids, tu_rng *r) {
  const int64_t n = c->tokens * c->k;
  for (int64_t t = 0; t < c->tokens; t++)
    for (int s = 0; s < c->k; s++) {
      int64_t id;
      switch (c->routing) {
        case ONE_EXPERT: id = id_range(c) / 2; break;
        case HOT: id = tu_rng_range(r, 0, 3) == 0 ? tu_rng_range(r, 0, id_range(c) - 1) : tu_rng_range(r, 0, 2); break;
        case WITH_INVALID: {
          const int64_t bad[3] = {-1, id_range(c), (int64_t)1 << 40};
          id = tu_rng_range(r, 0, 9) == 0 ? bad[tu_rng_range(r, 0, c->ids == CKJIT_I64 ? 2 : 1)]
                                          : tu_rng_range(r, 0, id_range(c) - 1);
          break;
        }
        default: { /* distinct experts per token when k <= experts */
          int again;
          do {
            id = tu_rng_range(r, 0, id_range(c) - 1);
            again = 0;
            for (int q = 0; q < s && c->k <= id_range(c); q++) again |= ids[t * c->k + q] == id;
          } while (again);
        }
      }
      ids[t * c->k + s] = id;
    }
  (void)n;
}

/* The expected outputs (a stable counting sort). */
typedef struct expected {
  int32_t *sorted, *offsets, *counts, *tiles;
  int32_t total, invalid;
} expected;

static void reference(const scase *c, const int64_t *ids, const int32_t *map, int64_t capacity, expected *x) {
  const int64_t n = c->tokens * c->k;
  const int32_t sentinel = (int32_t)n;
  memset(x->counts, 0, sizeof(int32_t) * (size_t)c->experts);
  x->invalid = 0;
  for (int64_t i = 0; i < n; i++) {
    const int64_t e = local_of(c, map, ids[i]);
    if (e >= 0) x->counts[e]++;
    else if (e == -2) x->invalid++;
  }
  int32_t at = 0;
  for (int e = 0; e < c->experts; e++) {
    x->offsets[e] = at;
    at += (x->counts[e] + c->tile_m - 1) / c->tile_m * c->tile_m;
  }
  x->offsets[c->experts] = x->total = at;
  for (int64_t p = 0; p < capacity; p++) x->sorted[p] = sentinel;
  for (int64_t q = 0; q < capacity / c->tile_m; q++) x->tiles[q] = -1;
  int32_t *fill = malloc(sizeof(int32_t) * (size_t)c->experts);
  if (!fill) abort();
  for (int e = 0; e < c->experts; e++) {
    fill[e] = x->offsets[e];
    for (int32_t q = x->offsets[e] / c->tile_m; q < x->offsets[e + 1] / c->tile_m; q++) x->tiles[q] = e;
  }
  for (int64_t i = 0; i < n; i++) {
    const int64_t e = local_of(c, map, ids[i]);
    if (e >= 0) x->sorted[fill[e]++] = (int32_t)i;
  }
  free(fill);
}

static void compare(gt_check *ck, const char *what, const int32_t *got, const int32_t *want, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      gt_fail(ck, "%s[%lld] = %d, want %d", what, (long long)i, got[i], want[i]);
      return;
    }
  gt_pass(ck);
}

static long run_case(gt_check *ck, size_t index, const scase *c, uint64_t seed) {
  const long f0 = ck->failures;
  tu_rng r = {seed};
  gt_check_begin(ck, "case %zu: tokens %lld k %d experts %d (of %d global) tile_m %d %s %s seed %llu", index,
                 (long long)c->tokens, c->k, c->experts, c->global, c->tile_m, routing_names[c->routing],
                 ckjit_dtype_name(c->ids), (unsigned long long)seed);
  const int64_t n = c->tokens * c->k, capacity = ckjit_moe_sort_capacity(c->tokens, c->k, c->experts, c->tile_m);
  gt_buf ids = {0}, out[6] = {{0}}, map = {0};
  expected x = {0};
  int64_t *host_ids = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  const int64_t lens[6] = {capacity, c->experts + 1, c->experts, capacity / c->tile_m, 1, 1};
  if (!host_ids || capacity <= 0) {
    gt_fail(ck, "capacity %lld (host malloc or the size query failed)", (long long)capacity);
    goto done;
  }
  if (c->global) {
    if (gt_buf_alloc(ck, &map, CKJIT_I32, (size_t)c->global)) goto done;
    make_map(c, (int32_t *)map.host, &r);
    if (gt_buf_upload(ck, &map)) goto done;
  }
  route(c, host_ids, &r);
  if (gt_buf_alloc(ck, &ids, c->ids, (size_t)n)) goto done;
  if (c->ids == CKJIT_I32)
    for (int64_t i = 0; i < n; i++) ((int32_t *)ids.host)[i] = (int32_t)host_ids[i];
  else
    memcpy(ids.host, host_ids, sizeof(int64_t) * (size_t)n);
  if (n && gt_buf_upload(ck, &ids)) goto done;
  for (int b = 0; b < 6; b++) {
    if (gt_buf_alloc(ck, &out[b], CKJIT_I32, (size_t)lens[b])) goto done;
    memset(out[b].host, 0x7F, (size_t)lens[b] * 4);
    if (gt_buf_upload(ck, &out[b])) goto done;
  }
  ckjit_moe_sort_desc d;
  ckjit_moe_sort_desc_init(&d);
  d.tokens = c->tokens, d.k = c->k, d.experts = c->experts, d.tile_m = c->tile_m, d.ids_dtype = c->ids;
  d.topk_ids = ids.dev, d.sorted_ids = out[0].dev, d.expert_offsets = out[1].dev, d.expert_counts = out[2].dev;
  d.tile_experts = out[3].dev, d.total_rows = out[4].dev, d.invalid = out[5].dev;
  if (c->global) d.expert_map = map.dev, d.global_experts = c->global;
  const ckjit_status st = ckjit_moe_sort(&d, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_moe_sort returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto done;
  }
  if (gt_sync(ck)) goto done;
  for (int b = 0; b < 6; b++)
    if (gt_buf_download(ck, &out[b], NULL)) goto done;
  x.sorted = malloc(sizeof(int32_t) * (size_t)capacity);
  x.offsets = malloc(sizeof(int32_t) * (size_t)(c->experts + 1));
  x.counts = malloc(sizeof(int32_t) * (size_t)c->experts);
  x.tiles = malloc(sizeof(int32_t) * (size_t)(capacity / c->tile_m));
  if (!x.sorted || !x.offsets || !x.counts || !x.tiles) {
    gt_fail(ck, "host malloc failed");
    goto done;
  }
  reference(c, host_ids, (const int32_t *)map.host, capacity, &x);
  compare(ck, "sorted_ids", (const int32_t *)out[0].host, x.sorted, capacity);
  compare(ck, "expert_offsets", (const int32_t *)out[1].host, x.offsets, c->experts + 1);
  compare(ck, "expert_counts", (const int32_t *)out[2].host, x.counts, c->experts);
  compare(ck, "tile_experts", (const int32_t *)out[3].host, x.tiles, capacity / c->tile_m);
  compare(ck, "total_rows", (const int32_t *)out[4].host, &x.total, 1);
  compare(ck, "invalid", (const int32_t *)out[5].host, &x.invalid, 1);
  if (n) { /* the ids are an input */
    uint8_t *back = malloc(ids.elems * gt_esize(c->ids));
    if (back && !gt_buf_download(ck, &ids, back)) {
      if (memcmp(back, ids.host, ids.elems * gt_esize(c->ids))) gt_fail(ck, "topk_ids changed");
      else gt_pass(ck);
    }
    free(back);
  }
done:
  free(host_ids);
  free(x.sorted), free(x.offsets), free(x.counts), free(x.tiles);
  gt_buf_free(&ids);
  gt_buf_free(&map);
  for (int b = 0; b < 6; b++) gt_buf_free(&out[b]);
  gt_check_end(ck);
  return ck->failures - f0;
}

static size_t build(scase *cs) {
  size_t i = 0;
  static const int64_t tokens[] = {0, 1, 7, 16, 16384};
  static const int ks[] = {1, 2, 8, 16};
  static const int experts[] = {8, 64, 256, 512, 1024};
  static const int tiles[] = {128, 64, 1};
  for (int a = 0; a < 5; a++)
    for (int b = 0; b < 4; b++) {
      const int j = a * 4 + b;
      cs[i++] = (scase){tokens[a], ks[b], experts[j % 5], tiles[j % 3], j % 4, j % 2 ? CKJIT_I64 : CKJIT_I32, 0};
    }
  cs[i++] = (scase){16384, 8, 256, 128, UNIFORM, CKJIT_I32, 0};    /* the benchmark's shape */
  cs[i++] = (scase){16384, 8, 256, 128, ONE_EXPERT, CKJIT_I64, 0}; /* one expert past 131072 rows */
  cs[i++] = (scase){4096, 8, 64, 128, WITH_INVALID, CKJIT_I64, 0};
  cs[i++] = (scase){3, 16, 8, 128, UNIFORM, CKJIT_I32, 0};         /* k > experts: repeated experts */
  /* expert parallelism: 16 of 64, 64 of 256 and 8 of 1000 global experts */
  cs[i++] = (scase){1000, 8, 16, 128, UNIFORM, CKJIT_I32, 64};
  cs[i++] = (scase){16384, 8, 64, 128, HOT, CKJIT_I64, 256};
  cs[i++] = (scase){777, 4, 8, 64, WITH_INVALID, CKJIT_I64, 1000};
  cs[i++] = (scase){5, 2, 8, 1, WITH_INVALID, CKJIT_I32, 12};
  return i;
}

static int requires(gt_ctx *ctx, char *why, size_t len) {
  (void)ctx, (void)why, (void)len;
  return 1; /* portable: runs on any GPU */
}

static gt_result run(gt_ctx *ctx) {
  static scase cases[32];
  const size_t count = build(cases);
  int failed = 0;
  for (size_t i = 0; i < count; i++)
    failed += run_case(ctx->ck, i, &cases[i], ctx->seed ^ (0x9E3779B97F4A7C15ull * (i + 1))) != 0;
  printf("moe_sort: %zu cases (%d failed), %ld checks, %ld failures\n", count, failed, ctx->ck->checks,
         ctx->ck->failures);
  return (gt_result){(long)count, failed};
}

static const gt_suite suite = {
    .name = "moe_sort_gpu",
    .cache_tag = "moe-sort-gpu",
    .requires = requires,
    .run = run,
    .check_stats = 1,
};

GT_MAIN(suite)
