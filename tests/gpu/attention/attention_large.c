/* Attention problems whose tensors pass 2^31 elements, so that every
 * offset the kernels form must be 64-bit (ckjit.h: "offsets are 64-bit, so
 * a tensor may exceed 2^31 elements").  Instead of gigabytes of keys (slow
 * to fill, and one block would walk them all), the strides put a few
 * small problems' rows far apart in one 5 GB bf16 buffer X, which is 0xFF
 * (NaN) everywhere else: an offset cut to 32 bits reads NaN (or faults)
 * and shows.
 *
 *   dense:  batch 2, heads 4 / 2, sq 37, sk 300, d 128, no mask; entry b's
 *           Q, K, V and O (each BHSD) at b * SLAB + {0, 2^15, 2^17, 2^18},
 *           SLAB = 2^31 + 2^20: entry 1 lies past element 2^31 (the batch
 *           stride times the entry);
 *   varlen: 2 entries of 5 / 7 queries and 120 / 180 keys, heads 2 / 1,
 *           causal; K and V rows of token t at t * 2^23 + 2^21 (V 128
 *           further): tokens 256 .. 299 lie past 2^31 (the sequence stride
 *           times the token); Q, O and LSE in small buffers.
 * Every row is checked against the reference, O's surroundings must stay
 * poison.  Skipped, with the reason, when the device cannot allocate X. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_gpu.h"

#define D 128
#define SLAB (((int64_t)1 << 31) + ((int64_t)1 << 20))
#define TOKEN_STRIDE ((int64_t)1 << 23)
#define TOKEN_BASE ((int64_t)1 << 21)
#define KEYS_B 300 /* varlen keys in all */

static const int64_t dense_off[4] = {0, (int64_t)1 << 15, (int64_t)1 << 17, (int64_t)1 << 18}; /* Q K V O */

typedef struct large {
  gt_check *ck;
  uint8_t *x;            /* device */
  int threads;
} large;

/* n values, uniform in [-1, 1), rounded to bf16: as doubles and as bf16 bits. */
static void gen(tu_rng *r, double *d, uint16_t *h, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h[i] = f32_to_bf16((float)gt_uniform(r, -1.0, 1.0));
    d[i] = bf16_to_f32(h[i]);
  }
}

static int copy(gt_check *ck, void *dst, const void *src, size_t bytes, ckjit_copy_kind kind) {
  const ckjit_status st = ckjit_memcpy(dst, src, bytes, kind);
  if (st != CKJIT_SUCCESS) gt_fail(ck, "ckjit_memcpy of %zu bytes: %s: %s", bytes, ckjit_status_string(st), ckjit_last_error());
  return st != CKJIT_SUCCESS;
}

/* Compares every row of a problem whose O rows (dv = D) were read into
 * got (row n at got + n * D, in (b, h, i) order) and LSE into lse. */
static void compare_all(gt_check *ck, const att_problem *p, const double *got, const float *lse, int threads) {
  int64_t n = 0;
  for (int64_t b = 0; b < p->batch; b++) n += p->hq * p->len_q[b];
  att_rowid *ids = calloc((size_t)n + 1, sizeof *ids);
  double *ref = malloc((size_t)n * D * sizeof *ref);
  att_row *rows = malloc((size_t)n * sizeof *rows);
  if (!ids || !ref || !rows) {
    gt_fail(ck, "host malloc failed");
    goto out;
  }
  n = 0;
  for (int64_t b = 0; b < p->batch; b++)
    for (int64_t h = 0; h < p->hq; h++)
      for (int64_t i = 0; i < p->len_q[b]; i++) ids[n++] = (att_rowid){b, h, i};
  att_ref_rows(p, ids, n, ref, rows, threads);
  char why[512];
  for (int64_t k = 0; k < n; k++) {
    const double l = lse[k];
    if (att_compare_row(p, got + k * D, &l, ref + k * D, &rows[k], why, sizeof why))
      gt_fail(ck, "row b %lld h %lld i %lld: %s", LL(ids[k].b), LL(ids[k].h), LL(ids[k].i), why);
    else
      gt_pass(ck);
  }
out:
  free(ids);
  free(ref);
  free(rows);
}

/* ---- dense: the batch stride past 2^31 ----------------------------------------------------- */

enum { DB = 2, DHQ = 4, DHK = 2, DSQ = 37, DSK = 300 };

static void run_dense(const large *L, tu_rng *rng, unsigned pipes) {
  gt_check *ck = L->ck;
  const size_t nq = (size_t)DB * DHQ * DSQ * D, nk = (size_t)DB * DHK * DSK * D;
  double *qd = malloc(nq * sizeof *qd), *kd = malloc(nk * sizeof *kd), *vd = malloc(nk * sizeof *vd);
  uint16_t *qh = malloc(nq * 2), *kh = malloc(nk * 2), *vh = malloc(nk * 2);
  /* O of one entry with 64 elements either side, as read back */
  const size_t o_entry = (size_t)DHQ * DSQ * D, o_win = o_entry + 128;
  uint16_t *ow = malloc(o_win * 2);
  double *got = malloc(nq * sizeof *got);
  float *lse = NULL, lse_h[DB * DHQ * DSQ];
  if (!qd || !kd || !vd || !qh || !kh || !vh || !ow || !got) {
    gt_fail(ck, "host malloc failed");
    goto out;
  }
  gen(rng, qd, qh, nq);
  gen(rng, kd, kh, nk);
  gen(rng, vd, vh, nk);
  for (int64_t b = 0; b < DB; b++) {
    uint8_t *slab = L->x + 2 * (size_t)(b * SLAB);
    if (copy(ck, slab + 2 * dense_off[0], qh + b * DHQ * DSQ * D, o_entry * 2, CKJIT_HOST_TO_DEVICE) ||
        copy(ck, slab + 2 * dense_off[1], kh + b * DHK * DSK * D, (size_t)DHK * DSK * D * 2, CKJIT_HOST_TO_DEVICE) ||
        copy(ck, slab + 2 * dense_off[2], vh + b * DHK * DSK * D, (size_t)DHK * DSK * D * 2, CKJIT_HOST_TO_DEVICE))
      goto out;
  }
  void *lse_dev = NULL;
  if (ckjit_malloc(&lse_dev, sizeof lse_h) != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_malloc: %s", ckjit_last_error());
    goto out;
  }
  lse = lse_dev;
  ckjit_attention_desc d;
  ckjit_attention_desc_init(&d);
  d.dtype = CKJIT_BF16, d.batch = DB, d.num_heads_q = DHQ, d.num_heads_kv = DHK;
  d.seqlen_q = DSQ, d.seqlen_k = DSK, d.head_dim_qk = d.head_dim_v = D;
  d.q = L->x + 2 * dense_off[0], d.k = L->x + 2 * dense_off[1], d.v = L->x + 2 * dense_off[2];
  d.o = L->x + 2 * dense_off[3];
  d.q_strides = d.o_strides = (ckjit_attention_strides){SLAB, DSQ * D, D, 1};
  d.k_strides = d.v_strides = (ckjit_attention_strides){SLAB, DSK * D, D, 1};
  d.lse = lse, d.lse_strides = (ckjit_attention_strides){DHQ * DSQ, DSQ, 1, 0};
  const int64_t len_q[DB] = {DSQ, DSQ}, len_k[DB] = {DSK, DSK};
  const att_problem p = {.dt = CKJIT_BF16, .batch = DB, .hq = DHQ, .hk = DHK, .dqk = D, .dv = D,
                         .len_q = len_q, .len_k = len_k,
                         .q = {qd, DHQ * DSQ * D, DSQ * D, D, 1}, .k = {kd, DHK * DSK * D, DSK * D, D, 1},
                         .v = {vd, DHK * DSK * D, DSK * D, D, 1}, .scale = (float)(1.0 / sqrt((double)D)),
                         .mask = CKJIT_ATTENTION_MASK_NONE, .wl = -1, .wr = -1};
  for (int pipe = 0; pipe < PIPE_COUNT; pipe++) {
    if (!(pipes & 1u << pipe)) continue;
    gt_check_begin(ck, "large dense (batch stride 2^31 + 2^20) on %s", pipe_names[pipe]);
    for (int64_t b = 0; b < DB; b++)
      if (ckjit_memset(L->x + 2 * (size_t)(b * SLAB + dense_off[3] - 64), 0xFF, o_win * 2) != CKJIT_SUCCESS)
        gt_fail(ck, "ckjit_memset: %s", ckjit_last_error());
    pipe_select(pipe);
    const ckjit_status st = ckjit_attention(&d, NULL);
    pipe_select(PIPE_AUTO);
    if (st != CKJIT_SUCCESS || ckjit_synchronize(NULL) != CKJIT_SUCCESS) {
      gt_fail(ck, "ckjit_attention: %s: %s", ckjit_status_string(st), ckjit_last_error());
      gt_check_end(ck);
      continue;
    }
    int bad = copy(ck, lse_h, lse, sizeof lse_h, CKJIT_DEVICE_TO_HOST);
    for (int64_t b = 0; b < DB && !bad; b++) {
      bad = copy(ck, ow, L->x + 2 * (size_t)(b * SLAB + dense_off[3] - 64), o_win * 2, CKJIT_DEVICE_TO_HOST);
      for (size_t e = 0; e < o_win && !bad; e++) {
        const int inside = e >= 64 && e < 64 + o_entry;
        if (inside) got[(size_t)b * o_entry + e - 64] = bf16_to_f32(ow[e]);
        if (!inside && ow[e] != 0xFFFF) {
          gt_fail(ck, "entry %lld: the element %lld away from O was written", LL(b),
                  e < 64 ? -(long long)(64 - e) : (long long)(e - 64 - o_entry + 1));
          bad = 1;
        }
      }
    }
    if (!bad) compare_all(ck, &p, got, lse_h, L->threads);
    gt_check_end(ck);
  }
out:
  if (lse) ckjit_free(lse);
  free(qd), free(kd), free(vd), free(qh), free(kh), free(vh), free(ow), free(got);
}

/* ---- varlen: the sequence stride past 2^31 ------------------------------------------------- */

enum { VB = 2, VHQ = 2, VQ = 12 };

static void run_varlen(const large *L, tu_rng *rng, unsigned pipes) {
  gt_check *ck = L->ck;
  static const int32_t cu_q[VB + 1] = {0, 5, 12}, cu_k[VB + 1] = {0, 120, KEYS_B};
  const size_t nq = (size_t)VQ * VHQ * D, nkv = (size_t)KEYS_B * D;
  double *qd = malloc(nq * sizeof *qd), *kd = malloc(nkv * sizeof *kd), *vd = malloc(nkv * sizeof *vd);
  uint16_t *qh = malloc(nq * 2), *kh = malloc(nkv * 2), *vh = malloc(nkv * 2), *oh = malloc((nq + 16) * 2);
  double *got = malloc(nq * sizeof *got);
  void *dq = NULL, *dout = NULL, *dcu = NULL, *dlse = NULL;
  float lse_h[VHQ * VQ], lse_rows[VHQ * VQ];
  if (!qd || !kd || !vd || !qh || !kh || !vh || !oh || !got) {
    gt_fail(ck, "host malloc failed");
    goto out;
  }
  gen(rng, qd, qh, nq);
  gen(rng, kd, kh, nkv);
  gen(rng, vd, vh, nkv);
  uint16_t row[2 * D];
  for (int64_t t = 0; t < KEYS_B; t++) { /* K then V, adjacent */
    memcpy(row, kh + t * D, 2 * D);
    memcpy(row + D, vh + t * D, 2 * D);
    if (copy(ck, L->x + 2 * (size_t)(t * TOKEN_STRIDE + TOKEN_BASE), row, sizeof row, CKJIT_HOST_TO_DEVICE)) goto out;
  }
  if (ckjit_malloc(&dq, nq * 2) || ckjit_malloc(&dout, (nq + 16) * 2) || ckjit_malloc(&dlse, sizeof lse_h) ||
      ckjit_malloc(&dcu, 2 * sizeof cu_q)) {
    gt_fail(ck, "ckjit_malloc: %s", ckjit_last_error());
    goto out;
  }
  if (copy(ck, dq, qh, nq * 2, CKJIT_HOST_TO_DEVICE) || copy(ck, dcu, cu_q, sizeof cu_q, CKJIT_HOST_TO_DEVICE) ||
      copy(ck, (uint8_t *)dcu + sizeof cu_q, cu_k, sizeof cu_k, CKJIT_HOST_TO_DEVICE))
    goto out;
  ckjit_attention_desc d;
  ckjit_attention_desc_init(&d);
  d.dtype = CKJIT_BF16, d.batch = VB, d.num_heads_q = VHQ, d.num_heads_kv = 1;
  d.seqlen_q = 7, d.seqlen_k = 180, d.head_dim_qk = d.head_dim_v = D;
  d.q = dq, d.q_strides = ckjit_attention_strides_bshd(VQ, VHQ, D);
  d.o = (uint8_t *)dout + 16, d.o_strides = d.q_strides; /* 8 poisoned elements either side */
  d.k = L->x + 2 * TOKEN_BASE, d.v = L->x + 2 * (TOKEN_BASE + D);
  d.k_strides = d.v_strides = (ckjit_attention_strides){0, 0, TOKEN_STRIDE, 1};
  d.lse = dlse, d.lse_strides = (ckjit_attention_strides){0, VQ, 1, 0};
  d.cu_seqlens_q = dcu, d.cu_seqlens_k = (const int32_t *)((const uint8_t *)dcu + sizeof cu_q);
  d.mask = CKJIT_ATTENTION_MASK_CAUSAL;
  const int64_t len_q[VB] = {5, 7}, len_k[VB] = {120, 180}, tok_q[VB + 1] = {0, 5, 12}, tok_k[VB + 1] = {0, 120, 300};
  const att_problem p = {.dt = CKJIT_BF16, .batch = VB, .hq = VHQ, .hk = 1, .dqk = D, .dv = D,
                         .len_q = len_q, .len_k = len_k, .tok_q = tok_q, .tok_k = tok_k,
                         .q = {qd, 0, D, VHQ * D, 1}, .k = {kd, 0, 0, D, 1}, .v = {vd, 0, 0, D, 1},
                         .scale = (float)(1.0 / sqrt((double)D)), .mask = CKJIT_ATTENTION_MASK_CAUSAL,
                         .wl = -1, .wr = -1};
  for (int pipe = 0; pipe < PIPE_COUNT; pipe++) {
    if (!(pipes & 1u << pipe)) continue;
    gt_check_begin(ck, "large varlen (token stride 2^23, 300 tokens) on %s", pipe_names[pipe]);
    if (ckjit_memset(dout, 0xFF, (nq + 16) * 2) != CKJIT_SUCCESS) gt_fail(ck, "ckjit_memset: %s", ckjit_last_error());
    pipe_select(pipe);
    const ckjit_status st = ckjit_attention(&d, NULL);
    pipe_select(PIPE_AUTO);
    if (st != CKJIT_SUCCESS || ckjit_synchronize(NULL) != CKJIT_SUCCESS) {
      gt_fail(ck, "ckjit_attention: %s: %s", ckjit_status_string(st), ckjit_last_error());
      gt_check_end(ck);
      continue;
    }
    if (copy(ck, oh, dout, (nq + 16) * 2, CKJIT_DEVICE_TO_HOST) || copy(ck, lse_h, dlse, sizeof lse_h, CKJIT_DEVICE_TO_HOST)) {
      gt_check_end(ck);
      continue;
    }
    int bad = 0;
    for (size_t e = 0; e < nq + 16 && !bad; e++)
      if ((e < 8 || e >= nq + 8) && oh[e] != 0xFFFF) {
        gt_fail(ck, "O's buffer element %zu (outside O) was written", e);
        bad = 1;
      }
    /* rows in (b, h, i) order: token tok_q[b] + i, head h */
    int64_t n = 0;
    for (int64_t b = 0; b < VB; b++)
      for (int64_t h = 0; h < VHQ; h++)
        for (int64_t i = 0; i < len_q[b]; i++, n++) {
          const int64_t t = tok_q[b] + i;
          for (int64_t c = 0; c < D; c++) got[n * D + c] = bf16_to_f32(oh[8 + (t * VHQ + h) * D + c]);
          lse_rows[n] = lse_h[h * VQ + t];
        }
    if (!bad) compare_all(ck, &p, got, lse_rows, L->threads);
    gt_check_end(ck);
  }
out:
  ckjit_free(dq), ckjit_free(dout), ckjit_free(dlse), ckjit_free(dcu);
  free(qd), free(kd), free(vd), free(qh), free(kh), free(vh), free(oh), free(got);
}

long run_large(gt_check *ck, uint64_t seed, unsigned pipes, int threads) {
  const long fails0 = ck->failures;
  const int64_t elems = (KEYS_B - 1) * TOKEN_STRIDE + TOKEN_BASE + 2 * D + GUARD;
  const size_t bytes = 2 * (size_t)elems;
  _Static_assert((KEYS_B - 1) * TOKEN_STRIDE + TOKEN_BASE > SLAB + ((int64_t)1 << 20),
                 "X holds both problems");
  _Static_assert(256 * TOKEN_STRIDE + TOKEN_BASE >= SLAB + ((int64_t)1 << 20) &&
                     255 * TOKEN_STRIDE + TOKEN_BASE + 2 * D <= ((int64_t)1 << 31),
                 "the varlen rows miss the dense entries");
  large L = {ck, NULL, threads};
  gt_check_begin(ck, "large problems");
  void *x = NULL;
  const ckjit_status st = ckjit_malloc(&x, bytes);
  L.x = x;
  if (st != CKJIT_SUCCESS) {
    if (st == CKJIT_ERROR_OUT_OF_MEMORY) {
      printf("SKIP the > 2^31-element problems: cannot allocate %.2f GB on the device (%s)\n", (double)bytes / 1e9,
             ckjit_last_error());
      return 0;
    }
    gt_fail(ck, "ckjit_malloc(%zu): %s: %s", bytes, ckjit_status_string(st), ckjit_last_error());
    return ck->failures - fails0;
  }
  if (ckjit_memset(L.x, 0xFF, bytes) != CKJIT_SUCCESS) {
    gt_fail(ck, "ckjit_memset: %s", ckjit_last_error());
  } else {
    tu_rng rng = {seed ^ 0x5DEECE66Dull};
    run_dense(&L, &rng, pipes);
    run_varlen(&L, &rng, pipes);
  }
  ckjit_free(L.x);
  const long failed = ck->failures - fails0;
  printf("large problems (%.2f GB buffer, offsets past 2^31): %s\n", (double)bytes / 1e9, failed ? "FAILED" : "ok");
  return failed;
}
