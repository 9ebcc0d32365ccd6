/* GPU suite for ckjit_paged_attention, ckjit_paged_kv_append and
 * ckjit_paged_kv_check (ckjit/paged_attention.h) against the float64
 * reference of attention_reference.c, which is given each sequence's keys
 * as one contiguous host copy: the test itself scatters them into pool
 * pages through shuffled tables (paged_problem.c), so the paging is
 * checked independently of the attention.
 *
 * Every case of paged_cases.c, in both table forms (padded, then CSR; the
 * CSR calls also pass a decoy padded table that must be ignored):
 *   - when the case appends, the pool starts without the queries' tokens
 *     (NaN in their slots); ckjit_paged_kv_append writes them; the pool
 *     must then equal the expected bytes exactly (the new slots copied
 *     bit for bit, nothing else changed) and *kv.error stay 0;
 *   - ckjit_paged_attention on every pipeline (auto and each forced one:
 *     the pipeline table of paged_cases.c).  A pipeline the device must
 *     have (pg_must_run: on sm_90 auto, decode, wgmma, mma, simt; decode
 *     only for at most 16 queries per sequence) must run every case
 *     (tensor-core ones every f16 / bf16 case, and refuse f32 with
 *     UNSUPPORTED, writing nothing); others may refuse (UNSUPPORTED:
 *     reported once per pipeline and dtype, skipped).
 *     O and LSE are poisoned before each call: outside their elements
 *     they must stay poison, inside be finite (LSE: -inf for rows without
 *     keys); the rows are compared with the reference (all, or a sample
 *     and each (b, h)'s first and last); *kv.error must stay 0 (garbage
 *     table cells past each sequence's pages must never be looked at);
 *   - ckjit_paged_kv_check of the good tables succeeds;
 *   - the CSR form's O and LSE must equal the padded form's byte for byte
 *     (same pipeline; not for decode-sized calls without the
 *     kv.max_seqlen_k hint, whose key splits follow the table form), and
 *     the inputs (pool, Q, tables, new tokens, scales) come back unchanged.
 * FP8 pages (the fp8 cases): the append's pool must hold e4m3(x / scale)
 * of each new element x bit for bit (paged_fp8.c's codec); the pipelines
 * without fp8 pages (wgmma, mma, mfma: pg_pipes' fp8 column) must refuse
 * every fp8 case with UNSUPPORTED, writing nothing, wherever they run;
 * decode must run those of at most 16 queries a sequence, simt and auto
 * all; and an append of new tokens holding NaNs (both signs) must store
 * NaN codes there, and everything else as before.
 * Then bad tables (paged_bad.c) and a pool past 4 GiB (paged_large.c).
 *
 * Environment: CKJIT_TEST_SEED, CKJIT_TEST_THREADS (reference threads),
 * CKJIT_TEST_SKIP_LARGE=1 (skips the pool past 4 GiB),
 * CKJIT_TEST_PAGED_ONLY=TEXT (only what TEXT is part of the name of: a
 * case, "bad tables", "large pool"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "paged_gpu.h"

static unsigned g_required; /* bit p: pg_pipes[p] must run */

/* ---- refusals ------------------------------------------------------------------------------ */

int pg_refused(int pipe, ckjit_dtype dt, int must_run) {
  static unsigned reported[3]; /* per dtype: pipelines whose refusal was printed */
  if (must_run) return 0;
  const int k = dt == CKJIT_F32 ? 0 : dt == CKJIT_F16 ? 1 : 2;
  if (!(reported[k] & 1u << pipe))
    printf("SKIP pipeline %s for %s paged attention: refused (%s)\n", pg_pipes[pipe].name, ckjit_dtype_name(dt),
           ckjit_last_error());
  reported[k] |= 1u << pipe;
  return 1;
}

/* ---- one case ------------------------------------------------------------------------------- */

typedef struct crun {
  pg_problem p;
  pg_dev v;
  pg_marks m;
  pg_rows rows;
  uint8_t *o_pad[32], *lse_pad[32]; /* per pipeline: O and LSE of the padded form */
  char ran[160];
} crun;

static const char *const form_names[2] = {"padded", "CSR"};

/* The append in form `csr`: the pool reset to `before`, the call, then the
 * pool must be `after` byte for byte and the error word 0.  When it is not,
 * `after` is uploaded, so that the attention runs check the attention
 * alone (the append's failure reported once). */
static void run_append(gt_check *ck, crun *r, int csr) {
  pg_dev *v = &r->v;
  if (pg_dev_upload_pool(ck, v, 0) || pg_dev_set_error(ck, v, 0)) return;
  ckjit_paged_kv_append_desc a;
  pg_dev_append_desc(v, csr, &a);
  const ckjit_status st = ckjit_paged_kv_append(&a, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_paged_kv_append (%s tables): %s: %s", form_names[csr], ckjit_status_string(st), ckjit_last_error());
    return;
  }
  const int32_t e = pg_dev_get_error(ck, v);
  if (e != 0) gt_fail(ck, "ckjit_paged_kv_append (%s tables) set *kv.error to %d on good tables", form_names[csr], e);
  const pg_case *c = r->p.c;
  const size_t es = gt_esize(pg_pool_dtype(c));
  int differs = 0;
  for (int i = 0; i < 2; i++) {
    if (!v->pool[i].dev || gt_buf_download(ck, &v->pool[i], NULL)) continue;
    const uint8_t *want = r->p.after[i];
    size_t e0 = 0, count = 0, next_code = 0;
    for (size_t k = 0; k < v->pool[i].elems; k++)
      if (memcmp(v->pool[i].host + k * es, want + k * es, es)) {
        if (!count++) e0 = k;
        next_code += c->fp8 && (v->pool[i].host[k] ^ want[k]) < 0x80 && abs(v->pool[i].host[k] - want[k]) == 1;
      }
    differs += count > 0;
    if (count && c->fp8)
      gt_fail(ck, "after ckjit_paged_kv_append (%s tables) fp8 pool %d differs from e4m3(x / scale) in %zu bytes, "
              "%zu of them the neighbouring code (rounding; first: element %zu = 0x%02X, want 0x%02X, before 0x%02X)",
              form_names[csr], i, count, next_code, e0, v->pool[i].host[e0], want[e0], r->p.before[i][e0]);
    else if (count)
      gt_fail(ck, "after ckjit_paged_kv_append (%s tables) pool %d differs from the expected bytes in %zu elements "
              "(first: element %zu = %g%s, want %g; the before-append value there was %g)",
              form_names[csr], i, count, e0, pg_pool_get(c, v->pool[i].host, e0),
              c->fp8 ? " (e4m3, unscaled)" : "", pg_pool_get(c, want, e0), pg_pool_get(c, r->p.before[i], e0));
    else
      gt_pass(ck);
  }
  if (differs) pg_dev_upload_pool(ck, v, 1);
}

/* FP8 pages: the append with NaNs in the new tokens (K and V, both signs,
 * the last new token of each sequence, a few dimensions): those elements
 * must become NaN codes (0x7F or 0xFF: paged_attention.h says NaN stays
 * NaN, not with which sign), every other byte of the pool as `after`.
 * Leaves the new tokens and the pool as they were. */
static void run_append_nan(gt_check *ck, crun *r) {
  pg_dev *v = &r->v;
  const pg_problem *p = &r->p;
  const pg_case *c = p->c;
  const int kv_buf = c->layout == PL_KV ? PB_K : PB_V;
  const size_t es = gt_esize(c->dt);
  uint8_t *want[2] = {NULL, NULL};
  int64_t nan_at[2 * PG_MAX_SEQ * 4][2]; /* (pool buffer, element) */
  int n = 0;
  for (int i = 0; i < 2; i++)
    if (p->pool_elems[i] && !(want[i] = malloc((size_t)p->pool_elems[i]))) goto out;
  for (int i = 0; i < 2; i++)
    if (want[i]) memcpy(want[i], p->after[i], (size_t)p->pool_elems[i]);
  for (int64_t b = 0; b < p->batch; b++) {
    if (!p->n_new[b]) continue;
    const int64_t t = p->tok_new[b + 1] - 1, j = p->len_k[b] - 1, page = p->pages[b][j / c->page], slot = j % c->page;
    for (int k = 0; k < 4; k++) { /* K, V; + and - NaN; head and dimension varying */
      const int is_v = k & 1;
      const int64_t g = (b + k) % c->hk, x = (37 * b + 11 * k) % c->d;
      const size_t ni = (size_t)(t * p->knew_st.seq + g * c->d + x + (is_v ? p->vnew_off : 0));
      const uint16_t bits = (uint16_t)((c->dt == CKJIT_F16 ? 0x7E00u : 0x7FC0u) | (k & 2 ? 0x8000u : 0u));
      memcpy(v->newb.host + ni * es, &bits, 2);
      nan_at[n][0] = is_v ? kv_buf : PB_K;
      nan_at[n++][1] = pg_pool_index(p, is_v, page, slot, g, x);
    }
  }
  if (gt_buf_upload(ck, &v->newb) || pg_dev_upload_pool(ck, v, 0) || pg_dev_set_error(ck, v, 0)) goto out;
  ckjit_paged_kv_append_desc a;
  pg_dev_append_desc(v, 0, &a);
  const ckjit_status st = ckjit_paged_kv_append(&a, NULL);
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_paged_kv_append: %s: %s", ckjit_status_string(st), ckjit_last_error());
    goto out;
  }
  const int32_t e = pg_dev_get_error(ck, v);
  if (e != 0) gt_fail(ck, "ckjit_paged_kv_append set *kv.error to %d on good tables", e);
  for (int k = 0; k < n; k++) want[nan_at[k][0]][nan_at[k][1]] = 0x7F;
  for (int i = 0; i < 2; i++) {
    if (!want[i] || gt_buf_download(ck, &v->pool[i], NULL)) continue;
    size_t count = 0, e0 = 0;
    for (size_t k = 0; k < v->pool[i].elems; k++) {
      const uint8_t got = v->pool[i].host[k], w = want[i][k];
      const int ok = got == w || (w == 0x7F && got == 0xFF && !isnan(pg_pool_get(c, p->after[i], k)));
      if (!ok && !count++) e0 = k;
    }
    if (count)
      gt_fail(ck, "pool %d after appending NaNs differs in %zu bytes (first: element %zu = 0x%02X, want 0x%02X)", i,
              count, e0, v->pool[i].host[e0], want[i][e0]);
    else
      gt_pass(ck);
  }
out:
  memcpy(v->newb.host, p->new_host, (size_t)p->new_elems * es);
  if (gt_buf_upload(ck, &v->newb) == 0) pg_dev_upload_pool(ck, v, 1);
  free(want[0]);
  free(want[1]);
}

/* The case on pipeline `pipe` in form `csr`; appends the pipeline's name to ran. */
static void run_pipe(gt_check *ck, crun *r, int pipe, int csr) {
  pg_dev *v = &r->v;
  const pg_case *c = r->p.c;
  if (pg_dev_poison_out(ck, v) || pg_dev_set_error(ck, v, 0)) return;
  ckjit_paged_attention_desc d;
  pg_dev_desc(v, csr, &d);
  pg_pipe_select(pipe);
  const ckjit_status st = ckjit_paged_attention(&d, NULL);
  pg_pipe_select(0);
  if (pg_must_refuse(pipe, c)) { /* f32 on tensor cores, fp8 pages without them: refuse, write nothing */
    if (st != CKJIT_ERROR_UNSUPPORTED) {
      gt_fail(ck, "forced %s returned %s for %s (want CKJIT_ERROR_UNSUPPORTED): %s", pg_pipes[pipe].name,
              ckjit_status_string(st), c->fp8 ? "fp8 pages" : "f32", ckjit_last_error());
    } else if (pg_dev_download_out(ck, v) == 0) {
      pg_check_out(ck, v, NULL);
      const int32_t e = pg_dev_get_error(ck, v);
      if (e != 0) gt_fail(ck, "a refused call set *kv.error to %d", e);
    }
    return;
  }
  if (st == CKJIT_ERROR_UNSUPPORTED && pg_refused(pipe, c->dt, pg_must_run(pipe, g_required, r->p.max_q))) return;
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_paged_attention returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    return;
  }
  const int32_t e = pg_dev_get_error(ck, v);
  if (e != 0) gt_fail(ck, "*kv.error is %d after a call on good tables (a garbage cell or a decoy read?)", e);
  if (pg_dev_download_out(ck, v)) return;
  pg_check_out(ck, v, &r->m);
  pg_rows_compare(ck, &r->rows, v);
  const size_t ob = v->o.elems * gt_esize(c->dt), lb = v->lse.dev ? v->lse.elems * 4 : 0;
  if (!csr) {
    r->o_pad[pipe] = malloc(ob);
    r->lse_pad[pipe] = lb ? malloc(lb) : NULL;
    if (r->o_pad[pipe]) memcpy(r->o_pad[pipe], v->o.host, ob);
    if (r->lse_pad[pipe]) memcpy(r->lse_pad[pipe], v->lse.host, lb);
  } else if (!r->o_pad[pipe]) {
    gt_fail(ck, "ran with CSR tables but not with padded ones");
  } else if (c->hint == PG_HINT_NONE && r->p.max_q <= PG_DECODE_MAX_Q) {
    /* Without the kv.max_seqlen_k hint decode plans its key splits from
     * the padded table's capacity, with CSR from 2^30 (paged_attention.h):
     * other splits, other roundings.  Both forms were compared with the
     * reference above. */
  } else if (memcmp(r->o_pad[pipe], v->o.host, ob) || (lb && memcmp(r->lse_pad[pipe], v->lse.host, lb))) {
    gt_fail(ck, "O or LSE with CSR tables differs from the padded tables' (same problem, same pipeline)");
  } else {
    gt_pass(ck);
  }
  if (csr) {
    const size_t used = strlen(r->ran);
    snprintf(r->ran + used, sizeof r->ran - used, " %s", pg_pipes[pipe].name);
  }
}

static void check_table_check(gt_check *ck, crun *r, int csr) {
  const ckjit_paged_kv kv = pg_dev_kv(&r->v, csr);
  const ckjit_status st = ckjit_paged_kv_check(&kv, r->p.batch, NULL);
  if (st != CKJIT_SUCCESS)
    gt_fail(ck, "ckjit_paged_kv_check of good %s tables: %s: %s", form_names[csr], ckjit_status_string(st),
            ckjit_last_error());
  else
    gt_pass(ck);
}

/* The inputs come back as uploaded (the pool as after the append). */
static void check_inputs(gt_check *ck, crun *r) {
  pg_dev *v = &r->v;
  gt_buf *bufs[] = {&v->pool[0], &v->pool[1], &v->q, &v->newb, &v->tab, &v->scale};
  static const char *const names[] = {"pool K (or K/V)", "pool V", "Q", "the new tokens", "the tables", "the fp8 scales"};
  for (int i = 0; i < 6; i++) {
    gt_buf *b = bufs[i];
    if (!b->dev) continue;
    const size_t bytes = b->elems * gt_esize(b->dt);
    const uint8_t *want = i < 2 ? r->p.after[i] : b->host;
    uint8_t *tmp = malloc(bytes);
    if (!tmp) continue;
    if (gt_buf_download(ck, b, tmp) == 0) {
      if (memcmp(tmp, want, bytes))
        gt_fail(ck, "input %s was modified", names[i]);
      else
        gt_pass(ck);
    }
    free(tmp);
  }
}

static long run_case(gt_check *ck, size_t index, const pg_case *c, uint64_t seed, int threads) {
  gt_check_begin(ck, "case %zu [%s] %s page %lld %s h %lld/%lld d %lld seed %llu", index, c->name,
                 ckjit_dtype_name(c->dt), LL(c->page), pg_layout_names[c->layout], LL(c->hq), LL(c->hk), LL(c->d),
                 (unsigned long long)seed);
  const long fails0 = ck->failures;
  crun *r = calloc(1, sizeof *r);
  if (!r) {
    gt_fail(ck, "host malloc failed");
    return 1;
  }
  if (pg_problem_build(&r->p, c, seed)) {
    gt_fail(ck, "host malloc failed");
  } else if (pg_dev_setup(ck, &r->v, &r->p, 1) == 0 && pg_marks_make(&r->m, &r->v) == 0 &&
             pg_rows_make(&r->rows, &r->p, c->sample, seed ^ 0xA5A5A5A5ull, threads, -1) == 0) {
    gt_check_end(ck);
    for (int csr = 0; csr < 2; csr++) {
      if (c->append) {
        gt_check_begin(ck, "case %zu [%s] append, %s tables", index, c->name, form_names[csr]);
        run_append(ck, r, csr);
        gt_check_end(ck);
      }
      for (int pipe = 0; pipe < pg_npipes; pipe++) {
        gt_check_begin(ck, "case %zu [%s] on %s, %s tables (seed %llu)", index, c->name, pg_pipes[pipe].name,
                       form_names[csr], (unsigned long long)seed);
        run_pipe(ck, r, pipe, csr);
        gt_check_end(ck);
      }
      gt_check_begin(ck, "case %zu [%s] ckjit_paged_kv_check, %s tables", index, c->name, form_names[csr]);
      check_table_check(ck, r, csr);
      gt_check_end(ck);
    }
    gt_check_begin(ck, "case %zu [%s] inputs", index, c->name);
    check_inputs(ck, r);
    if (c->fp8 && c->append) {
      gt_check_end(ck);
      gt_check_begin(ck, "case %zu [%s] append of NaNs into fp8 pages", index, c->name);
      run_append_nan(ck, r);
    }
  } else if (ck->failures == fails0) {
    gt_fail(ck, "host malloc failed");
  }
  gt_check_end(ck);
  const long failed = ck->failures - fails0;
  printf("case %zu [%s]: %s (ran on%s; %lld rows compared per run)\n", index, c->name, failed ? "FAILED" : "ok",
         r->ran, LL(r->rows.n));
  for (int i = 0; i < 32; i++) {
    free(r->o_pad[i]);
    free(r->lse_pad[i]);
  }
  pg_rows_free(&r->rows);
  pg_marks_free(&r->m);
  pg_dev_free(&r->v);
  pg_problem_free(&r->p);
  free(r);
  return failed;
}

/* ---- main ------------------------------------------------------------------------------------ */

static int selected(const char *name) {
  const char *only = getenv("CKJIT_TEST_PAGED_ONLY");
  return !only || !*only || strstr(name, only);
}

static gt_result run_all(gt_ctx *ctx) {
  gt_check *ck = ctx->ck;
  const time_t t0 = time(NULL);
  g_required = pg_pipes_required(&ctx->info);
  printf("pipelines the device must run:");
  for (int p = 0; p < pg_npipes; p++)
    if (g_required & 1u << p) printf(" %s", pg_pipes[p].name);
  printf("\n");
  pg_build_cases();
  long cases = 0, failed = 0;
  for (size_t i = 0; i < pg_ncases; i++)
    if (selected(pg_cases[i].name)) {
      cases++;
      failed += run_case(ck, i, &pg_cases[i], ctx->seed ^ (0x9E3779B97F4A7C15ull * (i + 1)), ctx->threads) != 0;
    }
  if (selected("bad tables")) {
    cases++;
    failed += pg_run_bad_tables(ck, ctx->seed, g_required, ctx->threads) != 0;
  }
  if (ctx->skip_large) {
    printf("SKIP the pool past 4 GiB: CKJIT_TEST_SKIP_LARGE is set\n");
  } else if (selected("large pool")) {
    cases++;
    failed += pg_run_large(ck, ctx->seed, g_required, ctx->threads) != 0;
  }
  printf("paged attention: %ld cases (%ld failed), %ld checks, %ld failures, %.0f s\n", cases, failed, ck->checks,
         ck->failures, difftime(time(NULL), t0));
  pg_free_cases();
  return (gt_result){cases, failed};
}

/* The cases' own rules: at most PG_MAX_SEQ sequences, shared pages whole
 * in both sequences and out of the append's reach, queries for append. */
static int case_rules(void) {
  pg_build_cases();
  int bad = 0;
  for (size_t i = 0; i < pg_ncases; i++) {
    const pg_case *c = &pg_cases[i];
    const char *why = NULL;
    if (c->batch < 1 || c->batch > PG_MAX_SEQ) why = "batch";
    else if (c->page < 1 || c->page > 1024 || (c->page & (c->page - 1))) why = "page size";
    else if (c->hq % c->hk) why = "heads";
    else if (pg_npipes > 32) why = "more than 32 pipelines";
    else if (c->fp8 && ((c->dt != CKJIT_F16 && c->dt != CKJIT_BF16) || c->hk > PG_FP8_MAX_HK))
      why = "fp8 pages: f16 or bf16, at most PG_FP8_MAX_HK K/V heads";
    else if (c->share_pages) {
      const int64_t shared = c->share_pages * c->page;
      for (int s = 0; s < 2 && !why; s++) {
        const int b = s ? c->share_b : c->share_a;
        const int64_t nq = c->varlen_q ? (c->nq < c->len_k[b] ? c->nq : c->len_k[b]) : c->nq;
        const int64_t n_new = c->append ? (nq < c->len_k[b] ? nq : c->len_k[b]) : 0;
        if (c->share_a >= c->share_b || c->share_b >= c->batch || c->len_k[b] - n_new < shared)
          why = "shared pages (not whole in both sequences, or written by the append)";
      }
    }
    for (int64_t g = 0; c->fp8 && !why && g < (c->per_head ? c->hk : 1); g++)
      if (!(c->k_scale[g] > 0.0f && c->v_scale[g] > 0.0f && isfinite(c->k_scale[g]) && isfinite(c->v_scale[g])))
        why = "fp8 scales (each head's, or the pool's one) must be positive and finite";
    if (why) {
      printf("FAIL paged case [%s]: %s\n", c->name, why);
      bad++;
    }
  }
  pg_free_cases();
  return bad;
}

static int self_checks(void) {
  return att_reference_self_check() + pg_problem_self_check() + pg_fp8_self_check() + case_rules();
}

static const gt_suite suite = {
    .name = "paged_attention_gpu",
    .cache_tag = "paged-gpu",
    .self_check = self_checks,
    .run = run_all,
    .check_stats = 1,
};

GT_MAIN(suite)
