/* A pool past 4 GiB (ckjit/paged_attention.h: "every address is formed in
 * 64-bit arithmetic ..., so a pool may pass 2^31 elements and 4 GiB, with
 * pages anywhere in it").
 *
 * One 5 GiB bf16 K/V-interleaved pool ([page][2][slot][head][dim], page
 * 16, heads 2, d 128: 16 KiB a page, 327680 pages, 2.68e9 elements), 0xFF
 * (NaN) everywhere; a small problem's pages (3 sequences of 300, 17 and
 * 1000 keys, 5 queries each, heads 8 / 2, causal) copied to page ids
 * spread over [2^18, num_pages): every byte of them past 4 GiB (element
 * 2^31).  An offset cut to 32 bits reads NaN (or faults) and shows.  On
 * every pipeline: every row against the reference, O's and LSE's
 * surroundings untouched, *kv.error 0, ckjit_paged_kv_check succeeds.
 * Then the same pages copied to ids below 2 GiB and the tables changed to
 * them: O and LSE must be bit-identical to the high pages' (same
 * pipeline).  Skipped, with the reason, when the pool cannot be allocated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paged_gpu.h"

#define POOL_BYTES ((size_t)5 << 30)
#define HIGH_FIRST ((int64_t)1 << 18) /* page id of byte 4 GiB: 2^32 / 2^14 */
#define LOW_END ((int64_t)1 << 17)    /* page id of byte 2 GiB */

typedef struct placement {
  int64_t first, step; /* local page id i lives at first + i * step */
} placement;

/* Copies every used page of p to its place in the pool and points the
 * tables at them (garbage cells -7). */
static int place(gt_check *ck, pg_dev *v, const int32_t *local_bt, const int32_t *local_ix, uint8_t *pool,
                 placement at) {
  pg_problem *p = v->p;
  const size_t page_bytes = (size_t)p->ks.page * 2;
  for (int64_t b = 0; b < p->batch; b++)
    for (int64_t i = 0; i < p->npages[b]; i++) {
      const int64_t id = p->pages[b][i], to = at.first + id * at.step;
      const ckjit_status st = ckjit_memcpy(pool + (size_t)to * page_bytes, p->after[PB_K] + (size_t)id * page_bytes,
                                           page_bytes, CKJIT_HOST_TO_DEVICE);
      if (st != CKJIT_SUCCESS) {
        gt_fail(ck, "ckjit_memcpy of page %lld: %s: %s", LL(to), ckjit_status_string(st), ckjit_last_error());
        return -1;
      }
    }
  for (int64_t b = 0; b < p->batch; b++)
    for (int64_t i = 0; i < p->max_pages; i++) {
      const int32_t id = local_bt[b * p->max_pages + i];
      p->block_table[b * p->max_pages + i] = i < p->npages[b] ? (int32_t)(at.first + id * at.step) : -7;
    }
  for (int64_t k = 0; k < p->n_indices; k++)
    p->indices[k] = k < p->indptr[p->batch] ? (int32_t)(at.first + local_ix[k] * at.step) : -7;
  return pg_dev_upload_tables(ck, v);
}

typedef struct lrun {
  pg_dev v;
  pg_marks m;
  pg_rows rows;
  uint8_t *pool;
  int64_t num_pages;
  uint8_t *o_high[32], *lse_high[32];
} lrun;

/* One call on `pipe` against the pool; high: compare with the reference
 * and keep O and LSE; else compare them with the high pages' bytes. */
static void run_pipe(gt_check *ck, lrun *L, int pipe, int high, unsigned required, char *ran, size_t len) {
  pg_dev *v = &L->v;
  gt_check_begin(ck, "large pool (pages %s) on %s", high ? "past 4 GiB" : "below 2 GiB", pg_pipes[pipe].name);
  ckjit_paged_attention_desc d;
  pg_dev_desc(v, 0, &d);
  d.kv.num_pages = L->num_pages;
  d.kv.k_pages = L->pool;
  d.kv.v_pages = L->pool + (size_t)v->p->v_off * 2;
  ckjit_status st = CKJIT_ERROR_INTERNAL;
  if (pg_dev_poison_out(ck, v) == 0 && pg_dev_set_error(ck, v, 0) == 0) {
    pg_pipe_select(pipe);
    st = ckjit_paged_attention(&d, NULL);
    pg_pipe_select(0);
    if (st == CKJIT_ERROR_UNSUPPORTED && pg_refused(pipe, CKJIT_BF16, pg_must_run(pipe, required, v->p->max_q))) {
      gt_check_end(ck);
      return;
    }
    if (st != CKJIT_SUCCESS)
      gt_fail(ck, "ckjit_paged_attention: %s: %s", ckjit_status_string(st), ckjit_last_error());
  }
  const size_t ob = v->o.elems * 2, lb = v->lse.elems * 4;
  if (st == CKJIT_SUCCESS) {
    const int32_t e = pg_dev_get_error(ck, v);
    if (e != 0) gt_fail(ck, "*kv.error is %d on good tables", e);
    if (e != -1000 && pg_dev_download_out(ck, v) == 0) {
      pg_check_out(ck, v, &L->m);
      if (high) {
        pg_rows_compare(ck, &L->rows, v);
        L->o_high[pipe] = malloc(ob);
        L->lse_high[pipe] = malloc(lb);
        if (L->o_high[pipe]) memcpy(L->o_high[pipe], v->o.host, ob);
        if (L->lse_high[pipe]) memcpy(L->lse_high[pipe], v->lse.host, lb);
        const size_t used = strlen(ran);
        snprintf(ran + used, len - used, " %s", pg_pipes[pipe].name);
      } else if (!L->o_high[pipe] || !L->lse_high[pipe]) {
        gt_fail(ck, "ran with the pages below 2 GiB but not with those past 4 GiB");
      } else if (memcmp(L->o_high[pipe], v->o.host, ob) || memcmp(L->lse_high[pipe], v->lse.host, lb)) {
        gt_fail(ck, "O or LSE with the pages below 2 GiB differs from the pages past 4 GiB (same pipeline)");
      } else {
        gt_pass(ck);
      }
    }
  }
  if (high) {
    ckjit_paged_kv kv = d.kv;
    st = ckjit_paged_kv_check(&kv, v->p->batch, NULL);
    if (st != CKJIT_SUCCESS)
      gt_fail(ck, "ckjit_paged_kv_check of the high tables: %s: %s", ckjit_status_string(st), ckjit_last_error());
  }
  gt_check_end(ck);
}

long pg_run_large(gt_check *ck, uint64_t seed, unsigned required, int threads) {
  const long fails0 = ck->failures;
  const pg_case c = pg_large_case();
  lrun *L = calloc(1, sizeof *L);
  pg_problem p;
  int32_t *bt = NULL, *ix = NULL;
  char ran[160] = "";
  int skipped = 0;
  if (!L) {
    gt_fail(ck, "host malloc failed");
    return 1;
  }
  gt_check_begin(ck, "large pool: set-up");
  if (pg_problem_build(&p, &c, seed ^ 0x4C41524745ull) || pg_dev_setup(ck, &L->v, &p, 0) ||
      pg_marks_make(&L->m, &L->v) || pg_rows_make(&L->rows, &p, 0, seed, threads, -1)) {
    if (ck->failures == fails0) gt_fail(ck, "host malloc failed");
    goto out;
  }
  const size_t page_bytes = (size_t)p.ks.page * 2;
  L->num_pages = (int64_t)(POOL_BYTES / page_bytes);
  void *pool = NULL;
  const ckjit_status st = ckjit_malloc(&pool, POOL_BYTES);
  if (st != CKJIT_SUCCESS) {
    printf("SKIP the pool past 4 GiB: cannot allocate %.2f GB on the device: %s (%s)\n", (double)POOL_BYTES / 1e9,
           ckjit_status_string(st), ckjit_last_error());
    skipped = 1;
    goto out;
  }
  L->pool = pool;
  bt = malloc((size_t)(p.batch * p.max_pages) * 4);
  ix = malloc((size_t)p.n_indices * 4);
  if (!bt || !ix || page_bytes != 16384) {
    gt_fail(ck, bt && ix ? "test bug: the page is not 16 KiB" : "host malloc failed");
    goto out;
  }
  memcpy(bt, p.block_table, (size_t)(p.batch * p.max_pages) * 4);
  memcpy(ix, p.indices, (size_t)p.n_indices * 4);
  if (ckjit_memset(L->pool, 0xFF, POOL_BYTES) != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_memset: %s", ckjit_last_error());
    goto out;
  }
  const placement high = {HIGH_FIRST + 11, (L->num_pages - HIGH_FIRST - 16) / p.num_pages};
  const placement low = {5, (LOW_END - 16) / p.num_pages};
  if (high.step < 1 || (high.first + (p.num_pages - 1) * high.step) >= L->num_pages) {
    gt_fail(ck, "test bug: the high placement does not fit the pool");
    goto out;
  }
  gt_check_end(ck);
  if (place(ck, &L->v, bt, ix, L->pool, high) == 0)
    for (int pipe = 0; pipe < pg_npipes; pipe++) run_pipe(ck, L, pipe, 1, required, ran, sizeof ran);
  gt_check_begin(ck, "large pool: the pages below 2 GiB");
  if (place(ck, &L->v, bt, ix, L->pool, low) == 0) {
    gt_check_end(ck);
    for (int pipe = 0; pipe < pg_npipes; pipe++) run_pipe(ck, L, pipe, 0, required, ran, sizeof ran);
  }
out:
  gt_check_end(ck);
  if (L->pool) ckjit_free(L->pool);
  for (int i = 0; i < 32; i++) {
    free(L->o_high[i]);
    free(L->lse_high[i]);
  }
  free(bt);
  free(ix);
  pg_rows_free(&L->rows);
  pg_marks_free(&L->m);
  pg_dev_free(&L->v);
  pg_problem_free(&p);
  free(L);
  const long failed = ck->failures - fails0;
  printf("large pool (%.2f GB, pages past 4 GiB, then below 2 GiB): %s (ran on%s)\n", (double)POOL_BYTES / 1e9,
         failed ? "FAILED" : skipped ? "skipped" : "ok", ran);
  return failed;
}
