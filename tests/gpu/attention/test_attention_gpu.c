/* GPU suite for ckjit_attention against the float64 reference of
 * attention_reference.c (which states the semantics and derives the
 * tolerances: bf16 O within ~0.012 max|V|, f16 ~0.003, f32 ~2e-4, LSE
 * ~1e-3, fully masked rows exactly O = 0 and LSE = -inf).
 *
 * Every case of attention_cases.c runs on every pipeline: the automatic
 * choice (CKJIT_ATTENTION_PIPELINE unset) and each forced one (wgmma, mma,
 * mfma, simt).  The pipelines the device must have (pipes_required: sm_90
 * wgmma + mma + simt, sm_80+ mma + simt) must run every case whose layout
 * they take; the others are skipped with the library's reason when they
 * refuse (CKJIT_ERROR_UNSUPPORTED).  A tensor-core pipeline must refuse
 * (UNSUPPORTED, writing nothing) f32 and the layouts it cannot read
 * (head-dim stride != 1, unaligned rows): a silent fallback would be a bug.
 *
 * Around every call: input buffers hold NaN everywhere outside their
 * tensors (a kernel that reads a padding or out-of-range element into a
 * result shows as NaN) and must come back unchanged; O and LSE buffers are
 * poisoned (0xFF) and every byte outside their elements must still be
 * poison afterwards; every O element must be finite (also in the rows a
 * sampled case does not compare), every LSE element not NaN.
 *
 * Then the problems past 2^31 elements (attention_large.c) and the API
 * behaviour that needs a device (an unknown CKJIT_ATTENTION_PIPELINE).
 *
 * Environment: CKJIT_TEST_SEED, CKJIT_TEST_THREADS (reference threads),
 * CKJIT_TEST_SKIP_LARGE=1 (skips the > 2^31-element problems),
 * CKJIT_TEST_ATTENTION_ONLY=TEXT (only what TEXT is part of the name of). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention_gpu.h"

/* ---- set-up ----------------------------------------------------------------------------- */

typedef struct run {
  const att_case *c;
  int varlen;
  att_plan pl;             /* lengths, views, buffer sizes */
  gt_buf buf[NBUF];
  double *dbl[NBUF];       /* inputs as doubles, element for element */
  att_problem prob;
  att_rowid *ids;          /* the rows compared with the reference */
  int64_t nids;
  double *ref_o;
  att_row *ref_rows;
  uint8_t *o_in, *lse_in;  /* 1: the element belongs to O / LSE */
  ckjit_attention_desc desc;
} run;

static void fill_view(gt_buf *b, const tview *t, tu_rng *rng, double lo, double hi) {
  for (int64_t e = 0; e < t->nb; e++)
    for (int64_t h = 0; h < t->nh; h++)
      for (int64_t s = 0; s < t->ns; s++)
        for (int64_t d = 0; d < t->nd; d++)
          gt_put(b->dt, b->host, (size_t)view_index(t, e, h, s, d), gt_uniform(rng, lo, hi));
}

/* The bias: uniform in [-2, 2]; with bias_inf also an eighth of the
 * entries and the whole row sq / 3 of every stored (entry, head) -inf. */
static void fill_bias(run *r, tu_rng *rng) {
  const tview *t = &r->pl.bias;
  gt_buf *b = &r->buf[B_BIAS];
  fill_view(b, t, rng, -2.0, 2.0);
  if (!r->c->bias_inf) return;
  for (int64_t e = 0; e < t->nb; e++)
    for (int64_t h = 0; h < t->nh; h++)
      for (int64_t i = 0; i < t->ns; i++)
        for (int64_t j = 0; j < t->nd; j++)
          if (i == t->ns / 3 || tu_rng_range(rng, 0, 7) == 0)
            gt_put(b->dt, b->host, (size_t)view_index(t, e, h, i, j), -INFINITY);
}

/* Marks the elements of an output view (O: nd dims; LSE: one) in `in`. */
static void mark_rows(const run *r, const tview *t, uint8_t *in) {
  for (int64_t b = 0; b < r->c->batch; b++)
    for (int64_t h = 0; h < t->nh; h++)
      for (int64_t i = 0; i < r->pl.len_q[b]; i++)
        for (int64_t d = 0; d < t->nd; d++)
          in[r->varlen ? view_index(t, 0, h, r->pl.tok_q[b] + i, d) : view_index(t, b, h, i, d)] = 1;
}

static att_view as_doubles(const run *r, const tview *t) {
  return (att_view){r->dbl[t->buf] + t->off, t->st.batch, t->st.head, t->st.seq, t->st.dim};
}

/* Inputs: NaN everywhere, then the tensors' values; uploaded, and kept as
 * doubles for the reference. */
static int setup_inputs(gt_check *ck, run *r, tu_rng *rng) {
  const att_case *c = r->c;
  const att_plan *pl = &r->pl;
  for (int i = 0; i < NBUF; i++)
    if (pl->elems[i] && gt_buf_alloc(ck, &r->buf[i], pl->dt[i], (size_t)pl->elems[i] + GUARD)) return -1;
  for (int i = B_Q; i <= B_ALIBI; i++)
    if (r->buf[i].dev && i != B_O && i != B_LSE) gt_fill_nan(r->buf[i].dt, r->buf[i].host, r->buf[i].elems);
  fill_view(&r->buf[B_Q], &pl->q, rng, -1.0, 1.0);
  fill_view(&r->buf[pl->k.buf], &pl->k, rng, -1.0, 1.0);
  fill_view(&r->buf[pl->v.buf], &pl->v, rng, -1.0, 1.0);
  if (c->bias) fill_bias(r, rng);
  if (c->alibi) /* ALiBi's geometric slopes 2^(-8 (h + 1) / heads), varied per entry */
    for (int64_t b = 0; b < (c->alibi == ALIBI_PER_BATCH ? c->batch : 1); b++)
      for (int64_t h = 0; h < c->hq; h++)
        gt_put(CKJIT_F32, r->buf[B_ALIBI].host, (size_t)(b * pl->alibi_sb + h),
               exp2(-8.0 * (double)(h + 1) / (double)c->hq) * (1.0 + 0.5 * (double)b));
  for (int64_t b = 0; c->varlen && b <= c->batch; b++) {
    const int32_t tq = (int32_t)pl->tok_q[b], tk = (int32_t)pl->tok_k[b];
    memcpy(r->buf[B_CUQ].host + 4 * b, &tq, 4);
    memcpy(r->buf[B_CUK].host + 4 * b, &tk, 4);
  }
  for (int i = 0; i < NBUF; i++) {
    if (!r->buf[i].dev || i == B_O || i == B_LSE) continue;
    if (gt_buf_upload(ck, &r->buf[i])) return -1;
    if (i >= B_CUQ) continue;
    r->dbl[i] = malloc(r->buf[i].elems * sizeof(double));
    if (!r->dbl[i]) {
      gt_fail(ck, "host malloc failed");
      return -1;
    }
    for (size_t e = 0; e < r->buf[i].elems; e++) r->dbl[i][e] = gt_get(r->buf[i].dt, r->buf[i].host, e);
  }
  return 0;
}

/* The reference problem and its rows (all, or a sample and each (b, h)'s
 * first and last rows). */
static int setup_reference(gt_check *ck, run *r, tu_rng *rng, int threads) {
  const att_case *c = r->c;
  const att_plan *pl = &r->pl;
  att_problem *p = &r->prob;
  p->dt = c->dt, p->batch = c->batch, p->hq = c->hq, p->hk = c->hk, p->dqk = c->dqk, p->dv = c->dv;
  p->len_q = pl->len_q, p->len_k = pl->len_k;
  p->tok_q = c->varlen ? pl->tok_q : NULL, p->tok_k = c->varlen ? pl->tok_k : NULL;
  p->q = as_doubles(r, &pl->q), p->k = as_doubles(r, &pl->k), p->v = as_doubles(r, &pl->v);
  if (c->bias) p->bias = as_doubles(r, &pl->bias);
  if (c->alibi) p->slopes = r->dbl[B_ALIBI], p->slope_sb = pl->alibi_sb;
  /* the scale ckjit uses: the float given, or (float)(1 / sqrt(dqk)) */
  p->scale = c->scale != 0.0f ? (double)c->scale : (double)(float)(1.0 / sqrt((double)c->dqk));
  p->softcap = c->softcap, p->mask = c->mask, p->wl = c->wl, p->wr = c->wr;
  int64_t rows = 0;
  for (int64_t b = 0; b < c->batch; b++) rows += c->hq * pl->len_q[b];
  const int64_t cap = c->sample > 0 ? c->sample + 2 * c->batch * c->hq : rows;
  r->ids = malloc((size_t)(cap + 1) * sizeof *r->ids);
  r->ref_o = malloc((size_t)(cap + 1) * (size_t)c->dv * sizeof *r->ref_o);
  r->ref_rows = malloc((size_t)(cap + 1) * sizeof *r->ref_rows);
  if (!r->ids || !r->ref_o || !r->ref_rows) {
    gt_fail(ck, "host malloc failed");
    return -1;
  }
  for (int64_t b = 0; b < c->batch; b++)
    for (int64_t h = 0; h < c->hq; h++)
      for (int64_t i = 0; i < pl->len_q[b]; i++)
        if (c->sample <= 0 || i == 0 || i == pl->len_q[b] - 1) r->ids[r->nids++] = (att_rowid){b, h, i};
  for (int s = 0; s < c->sample; s++) {
    const int64_t b = tu_rng_range(rng, 0, c->batch - 1), h = tu_rng_range(rng, 0, c->hq - 1);
    if (pl->len_q[b]) r->ids[r->nids++] = (att_rowid){b, h, tu_rng_range(rng, 0, pl->len_q[b] - 1)};
  }
  att_ref_rows(p, r->ids, r->nids, r->ref_o, r->ref_rows, threads);
  return 0;
}

static int setup_run(gt_check *ck, run *r, const att_case *c, uint64_t seed, int threads) {
  memset(r, 0, sizeof *r);
  r->c = c;
  r->varlen = c->varlen;
  tu_rng rng = {seed};
  plan_case(c, &r->pl);
  if (setup_inputs(ck, r, &rng)) return -1;
  r->o_in = calloc(r->buf[B_O].elems, 1);
  r->lse_in = c->lse ? calloc(r->buf[B_LSE].elems, 1) : NULL;
  if (!r->o_in || (c->lse && !r->lse_in)) {
    gt_fail(ck, "host malloc failed");
    return -1;
  }
  mark_rows(r, &r->pl.o, r->o_in);
  if (c->lse) mark_rows(r, &r->pl.lse, r->lse_in);
  void *base[NBUF];
  for (int i = 0; i < NBUF; i++) base[i] = r->buf[i].dev;
  plan_desc(c, &r->pl, base, &r->desc);
  return setup_reference(ck, r, &rng, threads);
}

static void free_run(run *r) {
  for (int i = 0; i < NBUF; i++) {
    gt_buf_free(&r->buf[i]);
    free(r->dbl[i]);
  }
  free(r->ids);
  free(r->ref_o);
  free(r->ref_rows);
  free(r->o_in);
  free(r->lse_in);
}

/* ---- checks ------------------------------------------------------------------------------ */

/* ckjit.h's tensor-core layout rule, from the descriptor itself. */
static int rows_aligned(const void *p, const ckjit_attention_strides *s, int varlen) {
  return s->dim == 1 && (uintptr_t)p % 16 == 0 && s->head % 8 == 0 && s->seq % 8 == 0 && (varlen || s->batch % 8 == 0);
}

static int desc_tensor_core_layout(const ckjit_attention_desc *d) {
  const int vl = d->cu_seqlens_q != NULL;
  return d->dtype != CKJIT_F32 && rows_aligned(d->q, &d->q_strides, vl) && rows_aligned(d->o, &d->o_strides, vl) &&
         (d->seqlen_k == 0 || (rows_aligned(d->k, &d->k_strides, vl) && rows_aligned(d->v, &d->v_strides, vl)));
}

/* Outside the marked elements: still poison; inside: written (finite;
 * for LSE, -inf allowed: a row without visible keys).  in NULL: no
 * element is marked (a refused call must leave everything poison). */
static void check_buffer(gt_check *ck, const gt_buf *b, const uint8_t *in, int is_lse, const char *what) {
  for (size_t e = 0; e < b->elems; e++) {
    const double v = gt_get(b->dt, b->host, e);
    if (!(in && in[e])) {
      if (!gt_is_poison(b->dt, b->host, e)) {
        gt_fail(ck, "%s: buffer element %zu, outside the tensor, was written (%g)", what, e, v);
        return;
      }
    } else if (isnan(v) || (isinf(v) && !(is_lse && v < 0))) {
      gt_fail(ck, "%s: element %zu is %g (not written, or not finite)", what, e, v);
      return;
    }
  }
  gt_pass(ck);
}

static void check_values(gt_check *ck, const run *r) {
  const att_case *c = r->c;
  const gt_buf *ob = &r->buf[B_O];
  double *got = malloc((size_t)c->dv * sizeof *got);
  if (!got) {
    gt_fail(ck, "host malloc failed");
    return;
  }
  char why[512];
  for (int64_t n = 0; n < r->nids; n++) {
    const att_rowid id = r->ids[n];
    const int64_t t = r->varlen ? r->pl.tok_q[id.b] + id.i : id.i, eb = r->varlen ? 0 : id.b;
    for (int64_t d = 0; d < c->dv; d++) got[d] = gt_get(c->dt, ob->host, (size_t)view_index(&r->pl.o, eb, id.h, t, d));
    double lse = 0.0;
    if (c->lse) lse = gt_get(CKJIT_F32, r->buf[B_LSE].host, (size_t)view_index(&r->pl.lse, eb, id.h, t, 0));
    if (att_compare_row(&r->prob, got, c->lse ? &lse : NULL, r->ref_o + n * c->dv, &r->ref_rows[n], why, sizeof why))
      gt_fail(ck, "row b %lld h %lld i %lld: %s", LL(id.b), LL(id.h), LL(id.i), why);
    else
      gt_pass(ck);
  }
  free(got);
}

/* Inputs must come back unchanged. */
static void check_inputs(gt_check *ck, run *r) {
  for (int i = 0; i < NBUF; i++) {
    gt_buf *b = &r->buf[i];
    if (!b->dev || i == B_O || i == B_LSE) continue;
    const size_t bytes = b->elems * gt_esize(b->dt);
    uint8_t *tmp = malloc(bytes);
    if (!tmp) continue;
    if (gt_buf_download(ck, b, tmp) == 0) {
      if (memcmp(tmp, b->host, bytes))
        gt_fail(ck, "input buffer %d was modified", i);
      else
        gt_pass(ck);
    }
    free(tmp);
  }
}

/* ---- one case on every pipeline ------------------------------------------------------------ */

static unsigned g_required;           /* 1 << PIPE_*: must run */
static unsigned g_refused[3];         /* per dtype class: pipelines that refused (reported once) */

static int dtype_class(ckjit_dtype dt) { return dt == CKJIT_F32 ? 0 : dt == CKJIT_F16 ? 1 : 2; }

/* Poisons O and LSE, runs the call on `pipe`; returns its status. */
static ckjit_status call_on(gt_check *ck, run *r, int pipe) {
  if (gt_buf_poison(ck, &r->buf[B_O]) || (r->c->lse && gt_buf_poison(ck, &r->buf[B_LSE]))) return CKJIT_ERROR_INTERNAL;
  pipe_select(pipe);
  const ckjit_status st = ckjit_attention(&r->desc, NULL);
  pipe_select(PIPE_AUTO);
  return st;
}

static int download_outputs(gt_check *ck, run *r) {
  return gt_sync(ck) || gt_buf_download(ck, &r->buf[B_O], NULL) ||
         (r->c->lse && gt_buf_download(ck, &r->buf[B_LSE], NULL));
}

/* The case on one pipeline; appends the pipeline's name to ran when it ran. */
static void run_pipe(gt_check *ck, run *r, int pipe, int tc, char *ran, size_t len) {
  const att_case *c = r->c;
  const int tensor_cores = pipe == PIPE_WGMMA || pipe == PIPE_MMA || pipe == PIPE_MFMA || pipe == PIPE_DECODE;
  const ckjit_status st = call_on(ck, r, pipe);
  if (tensor_cores && !tc) { /* must refuse, and write nothing */
    if (st != CKJIT_ERROR_UNSUPPORTED) {
      gt_fail(ck, "a forced tensor-core pipeline returned %s for a dtype / layout it cannot read (want "
              "CKJIT_ERROR_UNSUPPORTED): %s", ckjit_status_string(st), ckjit_last_error());
    } else if (download_outputs(ck, r) == 0) {
      check_buffer(ck, &r->buf[B_O], NULL, 0, "O after a refused call");
      if (c->lse) check_buffer(ck, &r->buf[B_LSE], NULL, 1, "LSE after a refused call");
    }
    return;
  }
  if (st == CKJIT_ERROR_UNSUPPORTED && !(g_required & 1u << pipe)) {
    unsigned *refused = &g_refused[dtype_class(c->dt)];
    if (!(*refused & 1u << pipe))
      printf("SKIP pipeline %s for %s: the device or the call does not take it (%s)\n", pipe_names[pipe], ckjit_dtype_name(c->dt),
             ckjit_last_error());
    *refused |= 1u << pipe;
    return;
  }
  if (st != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_attention returned %s: %s", ckjit_status_string(st), ckjit_last_error());
    return;
  }
  if (download_outputs(ck, r)) return;
  check_buffer(ck, &r->buf[B_O], r->o_in, 0, "O");
  if (c->lse) check_buffer(ck, &r->buf[B_LSE], r->lse_in, 1, "LSE");
  check_values(ck, r);
  const size_t used = strlen(ran);
  snprintf(ran + used, len - used, " %s", pipe_names[pipe]);
}

/* Runs one case on every pipeline; returns its failures. */
static long run_case(gt_check *ck, size_t index, const att_case *c, uint64_t seed, int threads) {
  gt_check_begin(ck, "case %zu [%s] %s b %lld h %lld/%lld sq %lld sk %lld d %lld/%lld seed %llu", index, c->name,
                 ckjit_dtype_name(c->dt), LL(c->batch), LL(c->hq), LL(c->hk), LL(c->sq), LL(c->sk), LL(c->dqk),
                 LL(c->dv), (unsigned long long)seed);
  const long fails0 = ck->failures;
  run r;
  char ran[128] = "";
  if (setup_run(ck, &r, c, seed, threads) == 0) {
    const int tc = case_tensor_core_layout(c);
    if (tc != desc_tensor_core_layout(&r.desc))
      gt_fail(ck, "test bug: the case says tensor-core layout %d, its descriptor %d", tc, !tc);
    gt_check_end(ck);
    for (int pipe = 0; pipe < PIPE_COUNT; pipe++) {
      gt_check_begin(ck, "case %zu [%s] on %s (seed %llu)", index, c->name, pipe_names[pipe], (unsigned long long)seed);
      run_pipe(ck, &r, pipe, tc, ran, sizeof ran);
      gt_check_end(ck);
    }
    gt_check_begin(ck, "case %zu [%s] inputs", index, c->name);
    check_inputs(ck, &r);
  }
  gt_check_end(ck);
  const long failed = ck->failures - fails0;
  printf("case %zu [%s]: %s (ran on%s; %lld rows compared)\n", index, c->name, failed ? "FAILED" : "ok", ran,
         LL(r.nids));
  free_run(&r);
  return failed;
}

/* ---- what needs a device: CKJIT_ATTENTION_PIPELINE's values ------------------------------- */

/* The variable is read on every call, after validation: an unknown value
 * is an argument error naming it (and writes nothing), an empty one is the
 * automatic choice, a descriptor error still wins, and on NVIDIA a forced
 * mfma is refused as unsupported. */
static long api_checks(gt_check *ck, const ckjit_device_info *info, uint64_t seed, int threads) {
  att_case c;
  memset(&c, 0, sizeof c);
  snprintf(c.name, sizeof c.name, "CKJIT_ATTENTION_PIPELINE values");
  c.dt = CKJIT_BF16, c.batch = 1, c.hq = c.hk = 2, c.sq = 17, c.sk = 33, c.dqk = c.dv = 128, c.lse = 1;
  c.mask = CKJIT_ATTENTION_MASK_NONE, c.wl = c.wr = -1;
  gt_check_begin(ck, "[%s]", c.name);
  const long fails0 = ck->failures;
  run r;
  if (setup_run(ck, &r, &c, seed, threads) == 0) {
    static const char *const values[] = {"tensorcore", "simt,mma", ""};
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
      if (gt_buf_poison(ck, &r.buf[B_O])) break;
      setenv("CKJIT_ATTENTION_PIPELINE", values[v], 1);
      const ckjit_status st = ckjit_attention(&r.desc, NULL);
      const char *msg = ckjit_last_error();
      const int empty = !values[v][0];
      if (empty ? st != CKJIT_SUCCESS
                : st != CKJIT_ERROR_INVALID_ARGUMENT || !strstr(msg, "CKJIT_ATTENTION_PIPELINE"))
        gt_fail(ck, "CKJIT_ATTENTION_PIPELINE=\"%s\": %s (%s); want %s", values[v], ckjit_status_string(st), msg,
                empty ? "SUCCESS (empty: automatic)" : "INVALID_ARGUMENT naming the variable");
      if (download_outputs(ck, &r) == 0) {
        if (empty) {
          check_buffer(ck, &r.buf[B_O], r.o_in, 0, "O");
          check_values(ck, &r);
        } else {
          check_buffer(ck, &r.buf[B_O], NULL, 0, "O after a refused call");
        }
      }
    }
    setenv("CKJIT_ATTENTION_PIPELINE", "bogus", 1);
    ckjit_attention_desc bad = r.desc;
    bad.softcap = NAN;
    ckjit_status st = ckjit_attention(&bad, NULL);
    if (st != CKJIT_ERROR_INVALID_ARGUMENT || !strstr(ckjit_last_error(), "softcap"))
      gt_fail(ck, "softcap NaN with an unknown pipeline: %s (%s); want the softcap's INVALID_ARGUMENT",
              ckjit_status_string(st), ckjit_last_error());
    if (strncmp(info->device_arch, "sm_", 3) == 0) {
      setenv("CKJIT_ATTENTION_PIPELINE", "mfma", 1);
      st = ckjit_attention(&r.desc, NULL);
      if (st != CKJIT_ERROR_UNSUPPORTED || !strstr(ckjit_last_error(), "mfma"))
        gt_fail(ck, "CKJIT_ATTENTION_PIPELINE=mfma on NVIDIA: %s (%s); want UNSUPPORTED naming it",
                ckjit_status_string(st), ckjit_last_error());
    }
    pipe_select(PIPE_AUTO);
    if (gt_sync(ck)) gt_fail(ck, "the device failed after the refused calls");
  }
  gt_check_end(ck);
  free_run(&r);
  const long failed = ck->failures - fails0;
  printf("[%s]: %s\n", c.name, failed ? "FAILED" : "ok");
  return failed;
}

/* ---- main -------------------------------------------------------------------------------- */

/* CKJIT_TEST_ATTENTION_ONLY=TEXT runs only what TEXT is part of the name
 * of (a case, "CKJIT_ATTENTION_PIPELINE values", "large problems"). */
static int selected(const char *name) {
  const char *only = getenv("CKJIT_TEST_ATTENTION_ONLY");
  return !only || !*only || strstr(name, only);
}

static gt_result run_all(gt_ctx *ctx) {
  gt_check *ck = ctx->ck;
  const time_t t0 = time(NULL);
  g_required = pipes_required(&ctx->info);
  printf("pipelines the device must run:");
  for (int p = 0; p < PIPE_COUNT; p++)
    if (g_required & 1u << p) printf(" %s", pipe_names[p]);
  printf("\n");
  build_cases();
  long cases = 0, failed = 0;
  for (size_t i = 0; i < g_ncases; i++)
    if (selected(g_cases[i].name)) {
      cases++;
      failed += run_case(ck, i, &g_cases[i], ctx->seed ^ (0x9E3779B97F4A7C15ull * (i + 1)), ctx->threads) != 0;
    }
  if (selected("CKJIT_ATTENTION_PIPELINE values")) {
    cases++;
    failed += api_checks(ck, &ctx->info, ctx->seed, ctx->threads) != 0;
  }
  if (ctx->skip_large) {
    printf("SKIP the > 2^31-element problems: CKJIT_TEST_SKIP_LARGE is set\n");
  } else if (selected("large problems")) {
    cases++;
    failed += run_large(ck, ctx->seed, g_required, ctx->threads) != 0;
  }
  printf("attention: %ld cases (%ld failed), %ld checks, %ld failures, %.0f s\n", cases, failed, ck->checks,
         ck->failures, difftime(time(NULL), t0));
  free(g_cases);
  return (gt_result){cases, failed};
}

static int self_checks(void) { return att_reference_self_check(); }

static const gt_suite suite = {
    .name = "attention_gpu",
    .cache_tag = "attention-gpu",
    .self_check = self_checks,
    .run = run_all,
    .check_stats = 1,
};

GT_MAIN(suite)
