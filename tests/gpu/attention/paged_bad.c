/* Bad tables on the device (ckjit/paged_attention.h: the kernels check
 * every page id against num_pages before reading a page, cut a length the
 * table cannot hold, set *kv.error; ckjit_paged_kv_check names the entry).
 *
 * One small problem (bf16, page 16, NHD, heads 8 / 2, d 128, keys 40 / 50
 * / 33, 4 varlen queries each, no mask: every key is read), its tables
 * good first (the control: *error stays 0, the check succeeds), then with
 * one bad entry in sequence 1 at a time:
 *   page id num_pages + 5 at its page 1, -1 at its page 3 (the last,
 *   partial one), in both forms; seqlens_k past the table's capacity and
 *   negative (padded); kv_last_page_len page + 1 and 0 (CSR).
 * On every pipeline: the call succeeds, the device survives (the
 * synchronization succeeds), *error is 1, nothing outside O and LSE is
 * written, the other sequences' rows match the reference (sequence 1's are
 * undefined), the pool is unchanged; without an error word (kv.error
 * NULL) the call still succeeds; ckjit_paged_kv_check returns
 * CKJIT_ERROR_INVALID_ARGUMENT naming sequence 1 and the entry.
 * And the append: sequence 1's page 3 (where its last two new tokens go)
 * outside the pool: those two are not written, everything else is, *error
 * is 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paged_gpu.h"

enum kind { K_GOOD, K_HIGH, K_NEG, K_CAP, K_LEN_NEG, K_LAST_BIG, K_LAST_ZERO };

typedef struct bad {
  const char *name;
  int csr, kind;
  const char *words[2]; /* the check's message must contain both */
} bad;

static const bad bads[] = {
    {"good tables (control)", 0, K_GOOD, {NULL, NULL}},
    {"good CSR tables (control)", 1, K_GOOD, {NULL, NULL}},
    {"page id num_pages + 5 at sequence 1's page 1", 0, K_HIGH, {"sequence 1", "page 1"}},
    {"CSR page id num_pages + 5 at sequence 1's page 1", 1, K_HIGH, {"sequence 1", "page 1"}},
    {"page id -1 at sequence 1's page 3 (its last)", 0, K_NEG, {"sequence 1", "page 3"}},
    {"CSR page id -1 at sequence 1's page 3 (its last)", 1, K_NEG, {"sequence 1", "page 3"}},
    {"seqlens_k[1] past the table's capacity", 0, K_CAP, {"sequence 1", "seqlens_k"}},
    {"seqlens_k[1] = -5", 0, K_LEN_NEG, {"sequence 1", "seqlens_k"}},
    {"kv_last_page_len[1] = page + 1", 1, K_LAST_BIG, {"sequence 1", "kv_last_page_len"}},
    {"kv_last_page_len[1] = 0 (a sequence with pages)", 1, K_LAST_ZERO, {"sequence 1", "kv_last_page_len"}},
};

enum { BAD_B = 1 };

/* Puts the bad entry of kind k into p's host tables. */
static void apply(pg_problem *p, int kind) {
  int32_t *row = p->block_table + BAD_B * p->max_pages, *ids = p->indices + p->indptr[BAD_B];
  const int32_t high = (int32_t)p->num_pages + 5;
  switch (kind) {
    case K_HIGH: row[1] = ids[1] = high; break;
    case K_NEG: row[3] = ids[3] = -1; break;
    case K_CAP: p->seqlens[BAD_B] = (int32_t)(p->max_pages * p->c->page + 1); break;
    case K_LEN_NEG: p->seqlens[BAD_B] = -5; break;
    case K_LAST_BIG: p->last_len[BAD_B] = (int32_t)p->c->page + 1; break;
    case K_LAST_ZERO: p->last_len[BAD_B] = 0; break;
    default: break;
  }
}

typedef struct saved {
  int32_t *bt, *ix, sl[PG_MAX_SEQ], ll[PG_MAX_SEQ];
} saved;

static int save(const pg_problem *p, saved *s) {
  s->bt = malloc((size_t)(p->batch * p->max_pages) * 4);
  s->ix = malloc((size_t)p->n_indices * 4);
  if (!s->bt || !s->ix) return -1;
  memcpy(s->bt, p->block_table, (size_t)(p->batch * p->max_pages) * 4);
  memcpy(s->ix, p->indices, (size_t)p->n_indices * 4);
  memcpy(s->sl, p->seqlens, sizeof s->sl);
  memcpy(s->ll, p->last_len, sizeof s->ll);
  return 0;
}

static void restore(pg_problem *p, const saved *s) {
  memcpy(p->block_table, s->bt, (size_t)(p->batch * p->max_pages) * 4);
  memcpy(p->indices, s->ix, (size_t)p->n_indices * 4);
  memcpy(p->seqlens, s->sl, sizeof s->sl);
  memcpy(p->last_len, s->ll, sizeof s->ll);
}

static void check_pool_is(gt_check *ck, pg_dev *v, uint8_t *const want[2], const char *what) {
  for (int i = 0; i < 2; i++) {
    gt_buf *b = &v->pool[i];
    if (!b->dev) continue;
    const size_t es = gt_esize(b->dt);
    uint8_t *tmp = malloc(b->elems * es);
    if (!tmp || gt_buf_download(ck, b, tmp)) {
      free(tmp);
      continue;
    }
    size_t first = 0, count = 0;
    for (size_t e = 0; e < b->elems; e++)
      if (memcmp(tmp + e * es, want[i] + e * es, es) && !count++) first = e;
    if (count)
      gt_fail(ck, "%s: pool %d differs from the expected bytes in %zu elements (first: element %zu = %g, want %g)", what,
              i, count, first, gt_get(b->dt, tmp, first), gt_get(b->dt, want[i], first));
    else
      gt_pass(ck);
    free(tmp);
  }
}

static void run_one(gt_check *ck, pg_dev *v, const bad *s, const pg_rows *rows, const pg_marks *m, unsigned required,
                    char *ran, size_t len) {
  const int good = s->kind == K_GOOD;
  for (int pipe = 0; pipe < pg_npipes; pipe++) {
    gt_check_begin(ck, "bad tables [%s] on %s", s->name, pg_pipes[pipe].name);
    if (pg_dev_poison_out(ck, v) || pg_dev_set_error(ck, v, 0)) {
      gt_check_end(ck);
      continue;
    }
    ckjit_paged_attention_desc d;
    pg_dev_desc(v, s->csr, &d);
    pg_pipe_select(pipe);
    const ckjit_status st = ckjit_paged_attention(&d, NULL);
    pg_pipe_select(0);
    if (st == CKJIT_ERROR_UNSUPPORTED && pg_refused(pipe, CKJIT_BF16, pg_must_run(pipe, required, v->p->max_q))) {
      gt_check_end(ck);
      continue;
    }
    if (st != CKJIT_SUCCESS) {
      gt_fail(ck, "ckjit_paged_attention returned %s (want SUCCESS: the tables are not the host's to check): %s",
              ckjit_status_string(st), ckjit_last_error());
      gt_check_end(ck);
      continue;
    }
    const int32_t e = pg_dev_get_error(ck, v); /* synchronizes: a crashed kernel fails here */
    if (e != (good ? 0 : 1))
      gt_fail(ck, "*kv.error is %d, want %d", e, good ? 0 : 1);
    if (e != -1000 && pg_dev_download_out(ck, v) == 0) {
      pg_check_out(ck, v, m);
      pg_rows_compare(ck, rows, v);
    }
    if (good && s->csr) {
      const size_t used = strlen(ran);
      snprintf(ran + used, len - used, " %s", pg_pipes[pipe].name);
    }
    gt_check_end(ck);
  }
  if (!good) { /* without an error word: still no crash */
    gt_check_begin(ck, "bad tables [%s], kv.error NULL", s->name);
    ckjit_paged_attention_desc d;
    pg_dev_desc(v, s->csr, &d);
    d.kv.error = NULL;
    const ckjit_status st = ckjit_paged_attention(&d, NULL);
    if (st != CKJIT_SUCCESS || gt_sync(ck))
      gt_fail(ck, "ckjit_paged_attention without an error word: %s: %s", ckjit_status_string(st), ckjit_last_error());
    else
      gt_pass(ck);
    gt_check_end(ck);
  }
  gt_check_begin(ck, "bad tables [%s]: ckjit_paged_kv_check and the pool", s->name);
  const ckjit_paged_kv kv = pg_dev_kv(v, s->csr);
  const ckjit_status st = ckjit_paged_kv_check(&kv, v->p->batch, NULL);
  const char *msg = ckjit_last_error();
  if (good ? st != CKJIT_SUCCESS
           : st != CKJIT_ERROR_INVALID_ARGUMENT || !strstr(msg, s->words[0]) || !strstr(msg, s->words[1]))
    gt_fail(ck, "ckjit_paged_kv_check: %s (\"%s\"); want %s%s%s%s%s", ckjit_status_string(st), msg,
            good ? "SUCCESS" : "INVALID_ARGUMENT naming \"", good ? "" : s->words[0], good ? "" : "\" and \"",
            good ? "" : s->words[1], good ? "" : "\"");
  else
    gt_pass(ck);
  check_pool_is(ck, v, v->p->after, "after the calls");
  gt_check_end(ck);
}

/* The append with sequence 1's page 3 outside the pool (both forms). */
static void run_append(gt_check *ck, uint64_t seed) {
  const pg_case c = pg_bad_tables_case(1);
  pg_problem p;
  pg_dev v;
  memset(&v, 0, sizeof v);
  gt_check_begin(ck, "bad tables: append into a page outside the pool");
  uint8_t *want[2] = {NULL, NULL};
  if (pg_problem_build(&p, &c, seed) || pg_dev_setup(ck, &v, &p, 1)) goto out;
  /* expected: every new token written but sequence 1's in its page 3 (keys 48, 49) */
  const int64_t page3 = p.pages[BAD_B][3];
  for (int i = 0; i < 2; i++) {
    if (!p.pool_elems[i]) continue;
    const size_t es = gt_esize(c.dt);
    want[i] = malloc((size_t)p.pool_elems[i] * es);
    if (!want[i]) goto out;
    memcpy(want[i], p.after[i], (size_t)p.pool_elems[i] * es);
    for (int64_t slot = 0; slot < 2; slot++)
      for (int64_t g = 0; g < c.hk; g++)
        for (int64_t x = 0; x < c.d; x++) {
          const size_t e = (size_t)pg_pool_index(&p, i, page3, slot, g, x);
          memcpy(want[i] + e * es, p.before[i] + e * es, es);
        }
  }
  if (p.n_new[BAD_B] != 4 || p.len_k[BAD_B] != 50) {
    gt_fail(ck, "test bug: sequence 1 appends %lld tokens to %lld keys, want 4 to 50", LL(p.n_new[BAD_B]),
            LL(p.len_k[BAD_B]));
    goto out;
  }
  p.block_table[BAD_B * p.max_pages + 3] = p.indices[p.indptr[BAD_B] + 3] = (int32_t)p.num_pages + 5;
  if (pg_dev_upload_tables(ck, &v)) goto out;
  for (int csr = 0; csr < 2; csr++) {
    if (pg_dev_upload_pool(ck, &v, 0) || pg_dev_set_error(ck, &v, 0)) goto out;
    ckjit_paged_kv_append_desc a;
    pg_dev_append_desc(&v, csr, &a);
    const ckjit_status st = ckjit_paged_kv_append(&a, NULL);
    if (st != CKJIT_SUCCESS) {
      gt_fail(ck, "ckjit_paged_kv_append (%s): %s: %s", csr ? "CSR" : "padded", ckjit_status_string(st),
              ckjit_last_error());
      continue;
    }
    const int32_t e = pg_dev_get_error(ck, &v);
    if (e != 1) gt_fail(ck, "ckjit_paged_kv_append (%s): *kv.error is %d, want 1", csr ? "CSR" : "padded", e);
    check_pool_is(ck, &v, want, csr ? "after the append (CSR)" : "after the append (padded)");
  }
out:
  gt_check_end(ck);
  free(want[0]);
  free(want[1]);
  pg_dev_free(&v);
  pg_problem_free(&p);
}

long pg_run_bad_tables(gt_check *ck, uint64_t seed, unsigned required, int threads) {
  const long fails0 = ck->failures;
  const pg_case c = pg_bad_tables_case(0);
  pg_problem p;
  pg_dev v;
  pg_rows all, others;
  pg_marks m, m_any;
  saved s = {NULL, NULL, {0}, {0}};
  memset(&v, 0, sizeof v);
  memset(&all, 0, sizeof all), memset(&others, 0, sizeof others);
  memset(&m, 0, sizeof m), memset(&m_any, 0, sizeof m_any);
  char ran[160] = "";
  gt_check_begin(ck, "bad tables: set-up");
  seed ^= 0xBADull;
  if (pg_problem_build(&p, &c, seed) || save(&p, &s) || pg_dev_setup(ck, &v, &p, 1) || pg_marks_make(&m, &v) ||
      pg_marks_make(&m_any, &v) || pg_rows_make(&all, &p, 0, seed, threads, -1) ||
      pg_rows_make(&others, &p, 0, seed, threads, BAD_B)) {
    if (ck->failures == fails0) gt_fail(ck, "host malloc failed");
    gt_check_end(ck);
    goto out;
  }
  gt_check_end(ck);
  for (int64_t h = 0; h < c.hq; h++) /* sequence 1's rows: undefined, but inside O */
    for (int64_t i = 0; i < p.len_q[BAD_B]; i++) {
      for (int64_t x = 0; x < c.d; x++) m_any.o_in[pg_o_index(&p, BAD_B, h, i, x)] = PG_MARK_ANY;
      m_any.lse_in[pg_lse_index(&p, BAD_B, h, i)] = PG_MARK_ANY;
    }
  for (size_t k = 0; k < sizeof bads / sizeof bads[0]; k++) {
    const bad *b = &bads[k];
    apply(&p, b->kind);
    if (pg_dev_upload_tables(ck, &v) == 0)
      run_one(ck, &v, b, b->kind == K_GOOD ? &all : &others, b->kind == K_GOOD ? &m : &m_any, required, ran,
              sizeof ran);
    restore(&p, &s);
  }
  run_append(ck, seed);
out:
  free(s.bt);
  free(s.ix);
  pg_rows_free(&all);
  pg_rows_free(&others);
  pg_marks_free(&m);
  pg_marks_free(&m_any);
  pg_dev_free(&v);
  pg_problem_free(&p);
  const long failed = ck->failures - fails0;
  printf("bad tables: %s (ran on%s)\n", failed ? "FAILED" : "ok", ran);
  return failed;
}
