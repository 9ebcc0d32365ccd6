/* Shared by the sources of the attention GPU test (test_attention_gpu):
 *   attention_reference.c  the float64 reference of ckjit.h's semantics, the
 *                          tolerances and their self-checks
 *   attention_cases.c      the case list, the pipelines' selection
 *   attention_layout.c     each case's tensors in its buffers, its descriptor
 *   test_attention_gpu.c   buffers, the runs on every pipeline, checks
 *   attention_large.c      the problems whose tensors pass 2^31 elements
 *   attention_specs.c      the kernel specs the cases request (a CPU test
 *                          against bench/gpu-test-specs.txt) */
#ifndef CKJIT_TESTS_GPU_ATTENTION_GPU_H
#define CKJIT_TESTS_GPU_ATTENTION_GPU_H

#include <stdint.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"

#define LL(x) ((long long)(x))
#define GUARD 11       /* poisoned / NaN elements after every buffer */
#define MAX_VARLEN 8   /* batch entries of a varlen case, at most */

/* ---- the reference (attention_reference.c) --------------------------------------------- */

/* A tensor as doubles, addressed like the device tensor it mirrors. */
typedef struct att_view {
  const double *p;
  int64_t sb, sh, ss, sd;
} att_view;

/* Deliberate mistakes, for the self-checks that prove the comparison can
 * fail (each is a bug a kernel could plausibly have). */
enum att_wrong {
  WRONG_NONE,
  WRONG_TOP_LEFT,       /* the causal / window diagonal aligned top-left (diag 0) */
  WRONG_WINDOW_RIGHT,   /* the window's right edge one key too far */
  WRONG_ALIBI_NO_ABS,   /* -slope * (i + sk - sq - j) without the absolute value */
  WRONG_NO_SOFTCAP,     /* the cap left out */
  WRONG_GQA_MODULO,     /* K/V head h % heads_kv instead of h / (heads_q / heads_kv) */
  WRONG_BIAS_NO_HEAD,   /* the bias's head index ignored */
  WRONG_COUNT
};

/* One problem as the reference sees it: inputs already rounded to their
 * dtype (so it sees exactly what the GPU sees). */
typedef struct att_problem {
  ckjit_dtype dt;
  int64_t batch, hq, hk, dqk, dv;
  const int64_t *len_q, *len_k; /* per batch entry */
  const int64_t *tok_q, *tok_k; /* varlen: each entry's first token; NULL: dense (batch strides) */
  att_view q, k, v;
  att_view bias;                /* p NULL: none; local (i, j) */
  const double *slopes;         /* NULL: no ALiBi; slopes[b * slope_sb + h] */
  int64_t slope_sb;
  double scale;                 /* the scale actually used (the default filled in) */
  double softcap;               /* 0: none */
  int mask;                     /* ckjit_attention_mask */
  int64_t wl, wr;               /* window bounds as given (< 0: unbounded) */
  int wrong;                    /* enum att_wrong */
} att_problem;

/* What the tolerance of one row depends on. */
typedef struct att_row {
  double lse;      /* -inf when no key is visible */
  int64_t visible; /* keys with a finite score */
  double vmax;     /* max |V| over the visible keys */
  double smax;     /* max |score| over the visible keys */
  double dotmax;   /* max over visible keys of |scale| * sum_d |q k| */
} att_row;

typedef struct att_rowid {
  int64_t b, h, i;
} att_rowid;

/* Row (b, h, i): O into o (dv doubles) and r. */
void att_ref_row(const att_problem *p, att_rowid id, double *o, att_row *r);

/* The rows ids[0 .. n-1] on `threads` threads: O into o (n * dv doubles). */
void att_ref_rows(const att_problem *p, const att_rowid *ids, int64_t n, double *o, att_row *rows,
                  int threads);

/* Tolerances of one row's O elements and LSE (derivation in attention_reference.c). */
double att_tol_o(const att_problem *p, const att_row *r);
double att_tol_lse(const att_problem *p, const att_row *r);

/* Compares one row: got_o (dv doubles, as read back in the dtype) and
 * *got_lse (NULL: LSE not written) against the reference ref_o, r.  Returns
 * the number of mismatches and describes the first in why. */
int att_compare_row(const att_problem *p, const double *got_o, const double *got_lse,
                    const double *ref_o, const att_row *r, char *why, size_t len);

/* The reference's self-checks (closed forms, and every att_wrong variant
 * caught by att_compare_row); returns the failures. */
int att_reference_self_check(void);

/* ---- the cases (attention_cases.c) --------------------------------------------------- */

enum att_layout {
  LAY_BSHD,        /* [b][s][h][d] */
  LAY_BHSD,        /* [b][h][s][d] */
  LAY_MIXED,       /* Q BHSD, K BSHD, V BHSD (O BSHD) */
  LAY_QKV_PACKED,  /* one [b][s][hq + 2 hk][d] buffer (sq == sk) */
  LAY_SEQ_PAD8,    /* BSHD, rows padded by 8 elements (still tensor-core layout) */
  LAY_SEQ_PAD_ODD, /* BSHD, rows padded by 3 elements: SIMT only */
  LAY_MISALIGNED,  /* BSHD, pointers one element past 16 bytes: SIMT only */
  LAY_DIM_STRIDE2, /* BSHD with head-dim stride 2: SIMT only */
  LAY_KV_BCAST,    /* BSHD, K and V batch stride 0 (one entry for all) */
  LAY_COUNT
};

enum { ATB_NONE, ATB_F32, ATB_DTYPE };             /* bias kinds */
enum { BB_BATCH = 1, BB_HEAD = 2 };                /* bias broadcast: stride 0 */
enum { ALIBI_NONE, ALIBI_PER_HEAD, ALIBI_PER_BATCH };

typedef struct att_case {
  char name[48];
  ckjit_dtype dt;
  int64_t batch, hq, hk, sq, sk, dqk, dv; /* varlen: sq, sk are the maxima passed */
  int layout;                             /* enum att_layout */
  ckjit_attention_mask mask;
  int64_t wl, wr;
  int bias, bias_bcast, bias_inf;         /* ATB_*, BB_* bits, -inf entries and one -inf row */
  int alibi;                              /* ALIBI_* */
  float scale, softcap;                   /* scale 0: the default 1 / sqrt(dqk) */
  int lse;                                /* LSE written */
  int pad_out;                            /* O and LSE padded (and offset) */
  int varlen;
  int odd_batch_stride;                   /* varlen: the unused batch strides odd, not 8k */
  int64_t lens_q[MAX_VARLEN], lens_k[MAX_VARLEN];
  int sample;                             /* > 0: rows checked against the reference */
} att_case;

extern att_case *g_cases;
extern size_t g_ncases;
void build_cases(void);

/* ---- layouts and descriptors (attention_layout.c) -------------------------------------- */

enum { B_Q, B_K, B_V, B_O, B_LSE, B_BIAS, B_ALIBI, B_CUQ, B_CUK, NBUF }; /* a case's buffers */

/* A tensor inside one of the case's buffers: element (b, h, s, d) is at
 * off + b sb + h sh + s ss + d sd (varlen: s is the packed token, b unused). */
typedef struct tview {
  int buf;
  int64_t off;
  ckjit_attention_strides st;
  int64_t nb, nh, ns, nd; /* stored extents (a broadcast dimension stores 1) */
} tview;

/* Where everything of a case lies. */
typedef struct att_plan {
  tview q, k, v, o, lse, bias;
  int64_t alibi_sb;                          /* 0: one row of slopes */
  int64_t len_q[MAX_VARLEN], len_k[MAX_VARLEN];
  int64_t tok_q[MAX_VARLEN + 1], tok_k[MAX_VARLEN + 1]; /* varlen: cu_seqlens */
  int64_t elems[NBUF];                       /* elements of each buffer (0: none) */
  ckjit_dtype dt[NBUF];
} att_plan;

int64_t view_index(const tview *t, int64_t b, int64_t h, int64_t s, int64_t d);

/* The case's lengths, views and buffer sizes. */
void plan_case(const att_case *c, att_plan *p);

/* The descriptor of case c, its buffers at base[B_*] (device addresses). */
void plan_desc(const att_case *c, const att_plan *p, void *const base[NBUF], ckjit_attention_desc *d);

/* Whether the tensor-core pipelines take the case's layout (ckjit.h's rule). */
int case_tensor_core_layout(const att_case *c);

/* ---- the pipelines ------------------------------------------------------------------- */

enum { PIPE_AUTO, PIPE_WGMMA, PIPE_MMA, PIPE_MFMA, PIPE_SIMT, PIPE_DECODE, PIPE_COUNT };
extern const char *const pipe_names[PIPE_COUNT]; /* "auto" (variable unset), "wgmma", ... */

/* Sets CKJIT_ATTENTION_PIPELINE for the pipeline (unset for auto). */
void pipe_select(int pipe);

/* The pipelines that must run on the device (by arch): 1 << PIPE_*. */
unsigned pipes_required(const ckjit_device_info *info);

/* ---- the large problems (attention_large.c) ------------------------------------------ */

/* Runs them on every pipeline in `pipes` (1 << PIPE_*); returns failures. */
long run_large(gt_check *ck, uint64_t seed, unsigned pipes, int threads);

#endif
