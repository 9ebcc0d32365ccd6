/* The cases of the paged attention GPU test and its pipeline table.
 *
 * Kernel specs are the expensive part (each is compiled), and the spec
 * parameters of a paged call are the dtype, the head dims, the mask kind,
 * the soft-cap and the page size; layouts, table forms, GQA, lengths,
 * query counts and window bounds are runtime arguments.  So the features
 * ride on few specs: bf16 / head dim 128 / causal for every page size
 * (1, 16, 32, 64, 128, 1024), no mask at pages 16 and 128 (those and the
 * causal ones at 1 / 16 / 128 are in the default prewarm set), one window
 * + soft-cap spec, head dims 64 and 256, f16, and f32 (SIMT).
 *
 * A batch of mixed lengths (mixed()): a long sequence, page + 1, an empty
 * one (0 keys, and 0 queries where the queries are varlen), 1, page - 1,
 * page, and where the case shares pages (share()) a seventh that starts
 * with the long one's first pages.  Queries per sequence: min(nq, keys)
 * (varlen) or nq (dense): decode 1, 2, 16; prefill 2048 new after a prefix.
 * The kv.max_seqlen_k hint (decode's split plan) is left 0, exact, or
 * wrong (7: too small, which must cost speed only) in the decode cases.
 * FP8 pages (fp8_cases) add the kv8 spec parameter: decode and SIMT specs
 * of their own, and the append's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paged_gpu.h"

/* ---- the pipelines: one line each ----------------------------------------------------- */

/* fp8 pages (paged_attention.h): decode (at most 16 queries, as always)
 * and simt run them, auto picks one of those; wgmma, mma and mfma forced
 * must refuse them (CKJIT_ERROR_UNSUPPORTED, writing nothing). */
const pg_pipe pg_pipes[] = {
    {"auto", PG_REQ_ALWAYS, 0, 0, 1},
    /* split-KV decode (sm_80+, mma.sync): at most 16 queries per sequence (README) */
    {"decode", PG_REQ_SM80, 1, PG_DECODE_MAX_Q, 1},
    {"wgmma", PG_REQ_SM90, 1, 0, 0},
    {"mma", PG_REQ_SM80, 1, 0, 0},
    {"mfma", PG_REQ_NEVER, 1, 0, 0}, /* unverified on hardware: refusals are reported, not failed */
    {"simt", PG_REQ_ALWAYS, 0, 0, 1},
};
const int pg_npipes = (int)(sizeof pg_pipes / sizeof pg_pipes[0]);

const char *const pg_layout_names[PL_COUNT] = {"NHD", "HND", "K/V interleaved"};

void pg_pipe_select(int p) {
  if (!strcmp(pg_pipes[p].name, "auto"))
    unsetenv("CKJIT_ATTENTION_PIPELINE");
  else
    setenv("CKJIT_ATTENTION_PIPELINE", pg_pipes[p].name, 1);
}

unsigned pg_pipes_required(const ckjit_device_info *info) {
  const int nvidia = strncmp(info->device_arch, "sm_", 3) == 0;
  const int sm = nvidia ? atoi(info->device_arch + 3) : 0;
  unsigned need = 0;
  for (int p = 0; p < pg_npipes; p++) {
    const int r = pg_pipes[p].required;
    if (r == PG_REQ_ALWAYS || (r == PG_REQ_SM80 && sm >= 80) || (r == PG_REQ_SM90 && sm == 90)) need |= 1u << p;
  }
  return need;
}

int pg_must_run(int p, unsigned required, int64_t max_q) {
  return (required & 1u << p) && (pg_pipes[p].max_q <= 0 || max_q <= pg_pipes[p].max_q);
}

int pg_must_refuse(int p, const pg_case *c) {
  return (pg_pipes[p].tensor_cores && c->dt == CKJIT_F32) || (c->fp8 && !pg_pipes[p].fp8);
}

/* ---- building the list ------------------------------------------------------------------ */

pg_case *pg_cases;
size_t pg_ncases;
static size_t g_cap;

#define BF CKJIT_BF16
#define FH CKJIT_F16
#define F32 CKJIT_F32
#define NONE CKJIT_ATTENTION_MASK_NONE
#define CAUSAL CKJIT_ATTENTION_MASK_CAUSAL
#define WINDOW CKJIT_ATTENTION_MASK_WINDOW

static pg_case *add(const char *name, ckjit_dtype dt, int64_t page, int layout, int64_t hq, int64_t hk, int64_t d) {
  if (pg_ncases == g_cap) {
    g_cap = g_cap ? 2 * g_cap : 64;
    pg_cases = realloc(pg_cases, g_cap * sizeof *pg_cases);
    if (!pg_cases) abort();
  }
  pg_case *c = &pg_cases[pg_ncases++];
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", name);
  c->dt = dt, c->page = page, c->layout = layout, c->hq = hq, c->hk = hk, c->d = d;
  c->mask = NONE, c->wl = c->wr = -1;
  c->lse = 1, c->varlen_q = 1, c->nq = 1;
  return c;
}

/* The mixed batch: long, page + 1, 0, 1, page - 1, page. */
static pg_case *mixed(pg_case *c, int64_t long_len) {
  const int64_t lens[6] = {long_len, c->page + 1, 0, 1, c->page - 1, c->page};
  c->batch = 6;
  memcpy(c->len_k, lens, sizeof lens);
  return c;
}

/* A seventh sequence whose first `pages` pages are the long one's (its
 * own tail of 37 keys after them). */
static pg_case *share(pg_case *c, int pages) {
  c->share_a = 0, c->share_b = c->batch, c->share_pages = pages;
  c->len_k[c->batch++] = pages * c->page + 37;
  return c;
}

static pg_case *queries(pg_case *c, int64_t nq, int varlen, int append) {
  c->nq = nq, c->varlen_q = varlen, c->append = append;
  return c;
}

static pg_case *masked(pg_case *c, ckjit_attention_mask m, int64_t wl, int64_t wr) {
  c->mask = m, c->wl = wl, c->wr = wr;
  return c;
}

/* Every page size, both separate-pool layouts: NHD with varlen queries
 * and the append, HND with dense queries (sequences shorter than the
 * query count: rows that see no key). */
static void page_cases(void) {
  static const int64_t pages[] = {1, 16, 32, 64, 128, 1024};
  static const int64_t nqs[] = {16, 2, 1};
  char name[72];
  for (size_t i = 0; i < sizeof pages / sizeof pages[0]; i++) {
    const int64_t ps = pages[i], long_len = ps == 1024 ? 3000 : 2500, nq = nqs[i % 3];
    snprintf(name, sizeof name, "page %lld NHD, decode %lld, append, causal", LL(ps), LL(nq));
    pg_case *c = share(queries(mixed(add(name, BF, ps, PL_NHD, 8, 2, 128), long_len), nq, 1, 1), ps >= 128 ? 1 : 3);
    masked(c, CAUSAL, -1, -1)->scale = 0.5f;
    c->pad_out = i % 2, c->hint = (int)(i % 3); /* kv.max_seqlen_k: none, exact, wrong */
    snprintf(name, sizeof name, "page %lld HND, dense queries %lld, append, causal", LL(ps), LL(nqs[(i + 1) % 3]));
    c = queries(mixed(add(name, BF, ps, PL_HND, 8, 2, 128), long_len), nqs[(i + 1) % 3], 0, 1);
    masked(c, CAUSAL, -1, -1)->pad_out = (i + 1) % 2;
    c->hint = (int)((i + 1) % 3);
  }
}

static void layout_cases(void) {
  pg_case *c = share(queries(mixed(add("page 16 K/V interleaved, decode 16, append", BF, 16, PL_KV, 8, 2, 128), 1800),
                             16, 1, 1), 4);
  masked(c, CAUSAL, -1, -1)->pad_out = 1;
  c->hint = PG_HINT_EXACT;
  c = queries(mixed(add("page 1 K/V interleaved, dense queries 2, append (odd rows)", BF, 1, PL_KV, 8, 1, 128), 700), 2,
              0, 1);
  masked(c, CAUSAL, -1, -1)->scale = 0.5f;
  c->odd_new = 1;
  c = queries(mixed(add("page 128 K/V interleaved, varlen 300, no append", BF, 128, PL_KV, 8, 2, 128), 1500), 300, 1, 0);
  masked(c, CAUSAL, -1, -1)->sample = 96;
}

/* No mask; GQA 8 and MQA; the LSE off; max_seqlen_q above the longest. */
static void nomask_cases(void) {
  pg_case *c = share(queries(mixed(add("page 16 no mask, MQA 8, decode 1, append", BF, 16, PL_NHD, 8, 1, 128), 2200),
                             1, 1, 1), 2);
  c->scale = 0.5f, c->hint = PG_HINT_LOW;
  c = queries(mixed(add("page 16 no mask, GQA 8, decode 2, lse off", BF, 16, PL_HND, 16, 2, 128), 1000), 2, 1, 0);
  c->lse = 0, c->max_q_extra = 5, c->pad_out = 1, c->hint = PG_HINT_EXACT;
  c = queries(mixed(add("page 128 no mask, GQA 4, dense queries 16", BF, 128, PL_NHD, 8, 2, 128), 2000), 16, 0, 1);
  c->scale = 0.5f;
  c = share(queries(mixed(add("page 128 no mask, MHA 4, decode 16, KV interleaved", BF, 128, PL_KV, 4, 4, 128), 900),
                    16, 1, 1), 1);
  c->lse = 0;
}

/* The window (both edges, left only, right only) and the soft-cap: one spec. */
static void window_cases(void) {
  pg_case *c = queries(mixed(add("page 16 window 64 / 16, softcap 2, decode 16", BF, 16, PL_NHD, 8, 2, 128), 2000), 16,
                       1, 1);
  masked(c, WINDOW, 64, 16)->softcap = 2.0f;
  c->scale = 0.5f, c->hint = PG_HINT_LOW;
  c = queries(mixed(add("page 16 window left 100 only, softcap 5, dense 2", BF, 16, PL_HND, 8, 2, 128), 1200), 2, 0, 0);
  masked(c, WINDOW, 100, -1)->softcap = 5.0f;
  c->pad_out = 1;
  c = queries(mixed(add("page 16 window right 8 only, softcap 1.5, varlen 40", BF, 16, PL_NHD, 8, 2, 128), 600), 40, 1,
              1);
  masked(c, WINDOW, -1, 8)->softcap = 1.5f;
  c = share(queries(mixed(add("page 16 window 128 / 0, softcap 3, prefill 2048 (sampled)", BF, 16, PL_KV, 8, 1, 128),
                          3000), 2048, 1, 0), 8);
  masked(c, WINDOW, 128, 0)->softcap = 3.0f;
  c->sample = 96, c->scale = 0.5f;
}

static void head_dim_dtype_cases(void) {
  pg_case *c = share(queries(mixed(add("d 64 page 16, MHA, decode 16, append, causal", BF, 16, PL_NHD, 4, 4, 64), 2000),
                             16, 1, 1), 2);
  masked(c, CAUSAL, -1, -1)->scale = 0.5f;
  c->hint = PG_HINT_EXACT;
  c = queries(mixed(add("d 256 page 16, GQA 4, decode 2, append (odd rows), causal", BF, 16, PL_HND, 8, 2, 256), 1500),
              2, 1, 1);
  masked(c, CAUSAL, -1, -1)->pad_out = 1;
  c->odd_new = 1;
  c = queries(mixed(add("d 256 page 16 K/V interleaved, varlen 200 (sampled)", BF, 16, PL_KV, 4, 1, 256), 900), 200, 1,
              1);
  masked(c, CAUSAL, -1, -1)->sample = 64;
  c = share(queries(mixed(add("f16 page 16, GQA 8, decode 16, append, causal", FH, 16, PL_NHD, 16, 2, 128), 1600), 16,
                    1, 1), 2);
  masked(c, CAUSAL, -1, -1)->scale = 0.5f;
  c->hint = PG_HINT_LOW;
  c = queries(mixed(add("f16 page 16 HND, dense queries 2, causal", FH, 16, PL_HND, 8, 1, 128), 800), 2, 0, 1);
  masked(c, CAUSAL, -1, -1);
  c = share(queries(mixed(add("f32 page 16, GQA 4, decode 16, append, causal (SIMT)", F32, 16, PL_NHD, 8, 2, 128), 1200),
                    16, 1, 1), 2);
  masked(c, CAUSAL, -1, -1)->pad_out = 1;
  c->hint = PG_HINT_EXACT;
}

/* Prefill: 2048 new tokens after a prefix in one sequence, the others
 * whole prompts; rows sampled. */
static void prefill_cases(void) {
  pg_case *c = share(queries(mixed(add("page 16 prefill 2048 after 1000, shared prefix, causal (sampled)", BF, 16, PL_NHD, 8,
                                       2, 128), 3048), 2048, 1, 0), 4);
  masked(c, CAUSAL, -1, -1)->sample = 128;
  c = queries(mixed(add("page 64 prefill 2048 after 700, append, causal (sampled)", BF, 64, PL_HND, 8, 2, 128), 2748),
              2048, 1, 1);
  masked(c, CAUSAL, -1, -1)->sample = 128;
  c->pad_out = 1;
  c = queries(mixed(add("page 128 prefill dense 300, no mask (sampled)", BF, 128, PL_NHD, 8, 2, 128), 1300), 300, 0, 1);
  c->sample = 96, c->scale = 0.5f;
  c = queries(mixed(add("f16 page 16 prefill 1024 after 500, append, causal (sampled)", FH, 16, PL_KV, 8, 2, 128), 1524),
              1024, 1, 1);
  masked(c, CAUSAL, -1, -1)->sample = 96;
}

/* FP8 e4m3 pages (kv.page_dtype; f32 dequantization scales): decode 1,
 * decode 16 and dense 16 (auto picks decode), a prefill of 200 (SIMT only);
 * pages 1, 16 and 128; NHD, HND and K/V-interleaved pools; one scale for
 * the pool and one per K/V head (0.02 .. 0.07 for K, so that the scores
 * stay moderate over codes up to 448; 0.1 .. 0.5 for V; some of few
 * significant bits, 2^-5, 2^-4, 2^-2, 2^-3, 7/16, so that the data hold
 * exact ties of the append's rounding: pg_fp8_draw);
 * GQA 4; head dims 64 and 128; bf16 and f16; causal and none, a soft-cap
 * (K's scale joins the softmax scale ahead of it); the LSE.  Every one
 * appends (the pool checked byte for byte against e4m3(x / scale), and
 * NaN new elements to NaN codes), then attends over the pages.  Values over
 * the whole e4m3 range: pg_fp8_draw. */
static void fp8(pg_case *c, int per_head, const float *k_scale, const float *v_scale) {
  c->fp8 = 1, c->per_head = per_head;
  for (int64_t g = 0; g < (per_head ? c->hk : 1); g++) c->k_scale[g] = k_scale[g], c->v_scale[g] = v_scale[g];
}

static void fp8_cases(void) {
  static const float pow2_k[1] = {0.03125f}, pow2_v[1] = {0.25f}, one_k[1] = {0.0371f}, one_v[1] = {0.37f};
  static const float head_k[4] = {0.0234f, 0.043f, 0.0275f, 0.0625f}, head_v[4] = {0.4375f, 0.125f, 0.31f, 0.19f};
  pg_case *c = share(queries(mixed(add("fp8 page 16, decode 1, append, causal, one scale", BF, 16, PL_NHD, 8, 2, 128),
                                   2000), 1, 1, 1), 2);
  masked(c, CAUSAL, -1, -1)->hint = PG_HINT_EXACT;
  fp8(c, 0, pow2_k, pow2_v);
  c = queries(mixed(add("fp8 f16 d 64 page 1 HND, GQA 4, decode 16, append, per-head", FH, 1, PL_HND, 16, 4, 64), 700),
              16, 1, 1);
  c->pad_out = 1;
  fp8(c, 1, head_k, head_v);
  c = queries(mixed(add("fp8 page 128 K/V, prefill 200 (SIMT), append, causal, per-head", BF, 128, PL_KV, 8, 2, 128),
                    1200), 200, 1, 1);
  masked(c, CAUSAL, -1, -1)->sample = 96;
  fp8(c, 1, head_k + 2, head_v + 2);
  c = queries(mixed(add("fp8 f16 page 16, dense 16, append, causal, softcap 3, one scale", FH, 16, PL_NHD, 8, 2, 128),
                    1000), 16, 0, 1);
  masked(c, CAUSAL, -1, -1)->softcap = 3.0f;
  c->hint = PG_HINT_LOW;
  fp8(c, 0, one_k, one_v);
}

/* The problem of the bad tables (paged_bad.c): bf16, page 16, NHD, heads
 * 8 / 2, d 128, keys 40 / 50 / 33, 4 varlen queries each (append: written
 * first), no mask. */
pg_case pg_bad_tables_case(int append) {
  pg_case c;
  memset(&c, 0, sizeof c);
  snprintf(c.name, sizeof c.name, "bad tables%s", append ? ", append" : "");
  c.dt = BF, c.page = 16, c.layout = PL_NHD, c.hq = 8, c.hk = 2, c.d = 128;
  c.batch = 3, c.len_k[0] = 40, c.len_k[1] = 50, c.len_k[2] = 33;
  c.nq = 4, c.varlen_q = 1, c.append = append;
  c.mask = NONE, c.wl = c.wr = -1, c.lse = 1, c.scale = 0.5f;
  return c;
}

/* The problem of the large pool (paged_large.c): bf16, page 16, K/V
 * interleaved, heads 8 / 2, d 128, keys 300 / 17 / 1000, 5 varlen queries
 * each, causal. */
pg_case pg_large_case(void) {
  pg_case c;
  memset(&c, 0, sizeof c);
  snprintf(c.name, sizeof c.name, "large pool");
  c.dt = BF, c.page = 16, c.layout = PL_KV, c.hq = 8, c.hk = 2, c.d = 128;
  c.batch = 3, c.len_k[0] = 300, c.len_k[1] = 17, c.len_k[2] = 1000;
  c.nq = 5, c.varlen_q = 1;
  c.mask = CAUSAL, c.wl = c.wr = -1, c.lse = 1, c.scale = 0.5f;
  return c;
}

void pg_free_cases(void) {
  free(pg_cases);
  pg_cases = NULL;
  pg_ncases = g_cap = 0;
}

void pg_build_cases(void) {
  pg_free_cases();
  page_cases();
  layout_cases();
  nomask_cases();
  window_cases();
  head_dim_dtype_cases();
  prefill_cases();
  fp8_cases();
}
