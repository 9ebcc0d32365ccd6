/* Shared by the sources of the paged-KV attention GPU test (test_paged_gpu;
 * the API is ckjit/paged_attention.h):
 *   paged_problem.c   one case's host side: lengths, page ids (shuffled,
 *                     shared prefix, garbage cells), both table forms, the
 *                     pool's layout, the data, the pool mirrors before and
 *                     after the append, the reference problem; the
 *                     self-checks of that construction (no GPU needed)
 *   paged_cases.c     the case list and the pipeline table
 *   test_paged_gpu.c  the device buffers, append, the runs on every
 *                     pipeline and both table forms, the checks, main()
 *   paged_bad.c       bad tables on the device: the error word, the check
 *   paged_large.c     a pool past 4 GiB
 *   paged_fp8.c       fp8 e4m3 pages: the codec (decode, the append's
 *                     rounding), the data drawn for them, and their
 *                     self-checks (all 256 codes; wrong scales caught)
 * The reference is attention_reference.c's (float64, ckjit.h's semantics),
 * given each sequence's keys as one contiguous host copy: it never sees a
 * page. */
#ifndef CKJIT_TESTS_GPU_PAGED_GPU_H
#define CKJIT_TESTS_GPU_PAGED_GPU_H

#include <stdint.h>

#include "attention_gpu.h"
#include "ckjit/paged_attention.h"

#define PG_MAX_SEQ 8
#define PG_FP8_MAX_HK 4 /* fp8 cases: K/V heads at most (one scale each) */

/* ---- cases (paged_cases.c) -------------------------------------------------------------- */

enum pg_layout {
  PL_NHD,   /* separate K and V pools [page][slot][head][dim] */
  PL_HND,   /* separate K and V pools [page][head][slot][dim] */
  PL_KV,    /* one pool [page][2][slot][head][dim]: v_pages = k_pages + one K half */
  PL_COUNT
};
extern const char *const pg_layout_names[PL_COUNT];

typedef struct pg_case {
  char name[72];
  ckjit_dtype dt;
  int64_t page;                /* page_size */
  int layout;                  /* enum pg_layout */
  int64_t hq, hk, d;           /* head_dim_qk = head_dim_v = d */
  int batch;
  int64_t len_k[PG_MAX_SEQ];   /* keys of each sequence (after the append) */
  int64_t nq;                  /* queries: min(nq, len_k) each (varlen), nq each (dense) */
  int varlen_q;                /* cu_seqlens_q given; else max_seqlen_q = nq per sequence */
  int64_t max_q_extra;         /* varlen: max_seqlen_q passed this much above the longest */
  int append;                  /* the queries' tokens written by ckjit_paged_kv_append first */
  int odd_new;                 /* the new tokens' rows 3 elements apart from 16 bytes (append vec 1) */
  int share_a, share_b;        /* share_pages > 0: sequence share_b's first pages are share_a's */
  int share_pages;
  ckjit_attention_mask mask;
  int64_t wl, wr;
  float scale, softcap;        /* scale 0: the default */
  int lse, pad_out;
  int hint;                    /* kv.max_seqlen_k: 0 none, PG_HINT_EXACT, PG_HINT_LOW (wrong: 7) */
  int sample;                  /* > 0: rows compared (plus each (b, h)'s first and last) */
  /* fp8 e4m3 pages (kv.page_dtype CKJIT_FP8_E4M3; dt is Q's and O's, f16 or bf16) */
  int fp8;
  int per_head;                /* fp8: kv.scale_stride 1 (scales [0 .. hk)), else 0 (scales [0]) */
  float k_scale[PG_FP8_MAX_HK], v_scale[PG_FP8_MAX_HK];
} pg_case;

enum { PG_HINT_NONE, PG_HINT_EXACT, PG_HINT_LOW };

extern pg_case *pg_cases;
extern size_t pg_ncases;
void pg_build_cases(void); /* (re)builds the list */
void pg_free_cases(void);
/* The problems of paged_bad.c (append: its append check) and paged_large.c. */
pg_case pg_bad_tables_case(int append);
pg_case pg_large_case(void);

/* ---- the pipelines (paged_cases.c) ---------------------------------------------------- */

enum pg_required { PG_REQ_ALWAYS, PG_REQ_SM80, PG_REQ_SM90, PG_REQ_NEVER };

/* The most queries per sequence the decode pipeline takes (README). */
#define PG_DECODE_MAX_Q 16

typedef struct pg_pipe {
  const char *name;     /* CKJIT_ATTENTION_PIPELINE's value; "auto": unset */
  int required;         /* enum pg_required: where the device must run it */
  int tensor_cores;     /* must refuse f32 (CKJIT_ERROR_UNSUPPORTED, writing nothing) */
  int64_t max_q;        /* > 0: must run only calls of at most this many queries per sequence */
  int fp8;              /* takes fp8 pages; 0: must refuse them (CKJIT_ERROR_UNSUPPORTED, writing nothing) */
} pg_pipe;

extern const pg_pipe pg_pipes[];
extern const int pg_npipes;

/* Sets CKJIT_ATTENTION_PIPELINE for pipeline p (unsets it for auto). */
void pg_pipe_select(int p);
/* The pipelines (bit p: pg_pipes[p]) the device must run. */
unsigned pg_pipes_required(const ckjit_device_info *info);
/* Whether pipeline p must run a call of max_seqlen_q `max_q` (f16 / bf16;
 * tensor-core pipelines must refuse f32) on a device that must run
 * `required`. */
int pg_must_run(int p, unsigned required, int64_t max_q);
/* Whether pipeline p must refuse case c wherever it runs: a tensor-core
 * pipeline and f32, or a pipeline without fp8 pages and an fp8 case. */
int pg_must_refuse(int p, const pg_case *c);

/* ---- one case's host side (paged_problem.c) --------------------------------------------- */

enum { PB_K, PB_V };  /* pool buffers (PL_KV: one, PB_K) */

typedef struct pg_problem {
  const pg_case *c;
  int64_t batch;
  int64_t len_k[PG_MAX_SEQ], len_q[PG_MAX_SEQ], n_new[PG_MAX_SEQ];
  int64_t tok_k[PG_MAX_SEQ + 1], tok_q[PG_MAX_SEQ + 1], tok_new[PG_MAX_SEQ + 1];
  int64_t max_q;               /* max_seqlen_q passed */
  int64_t rows_q;              /* query rows of the Q tensor (dense: batch * max_q) */
  /* pages */
  int64_t npages[PG_MAX_SEQ];
  int64_t num_pages;
  int32_t *pages[PG_MAX_SEQ];  /* each sequence's page ids (into ids_store) */
  int32_t *ids_store;
  /* padded form */
  int64_t max_pages;
  int32_t *block_table;        /* [batch][max_pages], garbage past each sequence's pages */
  int32_t seqlens[PG_MAX_SEQ];
  /* CSR form */
  int32_t indptr[PG_MAX_SEQ + 1];
  int32_t *indices;            /* indptr[batch] ids, then PG_CSR_TAIL garbage entries */
  int64_t n_indices;
  int32_t last_len[PG_MAX_SEQ];
  /* the pool (fp8 pages: elements are e4m3 bytes) */
  ckjit_paged_strides ks, vs;
  int64_t v_off;               /* V's first element in its buffer (PL_KV: one K half) */
  int64_t pool_elems[2];       /* elements of each pool buffer (PB_V 0 for PL_KV) */
  uint8_t *before[2], *after[2]; /* host mirrors (pool dtype): before / after the append; NaN elsewhere */
  /* each sequence's keys, contiguous [token][head][dim] at tok_k: what the reference sees
   * (fp8: the dequantized values scale * e4m3_value(code), in double) */
  double *kd, *vd;
  /* fp8: the same keys' values x in dt (the new tokens the append quantizes; the
   * other keys' codes were quantized from them on the host alike), their codes
   * e4m3(x / scale), and the scales of each K/V head as the device reads them */
  double *kx, *vx;
  uint8_t *kcode, *vcode;
  double kscale[PG_FP8_MAX_HK], vscale[PG_FP8_MAX_HK];
  /* the new tokens (append): packed [token][head][dim] (PL_KV: [token][2][head][dim]) */
  ckjit_attention_strides knew_st;
  int64_t vnew_off, new_elems;
  uint8_t *new_host;
  /* Q, O, LSE */
  ckjit_attention_strides q_st, o_st, lse_st;
  int64_t o_off, lse_off, q_elems, o_elems, lse_elems;
  uint8_t *q_host;
  double *qd;                  /* Q as doubles, element for element */
  att_problem ref;
} pg_problem;

#define PG_CSR_TAIL 3
#define PG_SCALE_V 8   /* fp8: the V scales' first element in the device's scale buffer */

/* Builds case c's host side from the seed; 0, or -1 (host memory). */
int pg_problem_build(pg_problem *p, const pg_case *c, uint64_t seed);
/* Only the shapes: lengths, pages, tables, the pool's and Q's, O's and
 * LSE's strides and sizes (no data, no reference). */
int pg_problem_plan(pg_problem *p, const pg_case *c, uint64_t seed);
void pg_problem_free(pg_problem *p);

/* The pools' element type: CKJIT_FP8_E4M3 for fp8 cases, else the case's dtype. */
ckjit_dtype pg_pool_dtype(const pg_case *c);
/* Element i of a pool buffer as stored (fp8: the e4m3 value, unscaled). */
double pg_pool_get(const pg_case *c, const uint8_t *buf, size_t i);

/* Element index of (page, slot, head, dim) of K (v 0) or V (v 1) in its pool buffer. */
int64_t pg_pool_index(const pg_problem *p, int v, int64_t page, int64_t slot, int64_t head, int64_t dim);
/* Element index of O's (b, h, i, dim) / LSE's (b, h, i) in their buffers. */
int64_t pg_o_index(const pg_problem *p, int64_t b, int64_t h, int64_t i, int64_t dim);
int64_t pg_lse_index(const pg_problem *p, int64_t b, int64_t h, int64_t i);

/* The self-checks of the construction (scatter through the tables and
 * gather back, both forms agree, garbage never referenced, the append's
 * slots); returns the failures. */
int pg_problem_self_check(void);

/* ---- fp8 e4m3 pages (paged_fp8.c) ------------------------------------------------------- */

/* OCP e4m3fn: bias 7, largest 448 (0x7E), no infinity, NaN 0x7F / 0xFF,
 * subnormals m 2^-9.  The value of a code (NaN for 0x7F / 0xFF). */
double pg_e4m3_value(uint8_t code);
/* The code of q: round to nearest, ties to even, saturating to +-448
 * (infinities too), NaN to NaN (0x7F, 0xFF with its sign); the sign of a
 * zero result kept.  paged_attention.h's rule for the append is
 * e4m3(x / scale): the test gives q = x / scale exactly (in double). */
uint8_t pg_e4m3_encode(double q);
/* A value (in dt) for an fp8 element of scale `scale`: codes over the
 * whole e4m3 range (subnormals, +-448, zeros of both signs), moved by up to
 * 6% (the rounding), past 448 and infinite (saturated), and exact ties
 * x / scale = a midpoint of two codes wherever dt holds scale times it
 * (scales of few significant bits: 2^-5, 7/16; the rule says the even
 * code, and a correctly rounded f32 quotient is the tie itself).  Never
 * within 2^-16 (relative) of a boundary but on it: there an f32 quotient's
 * rounding, which the rule does not fix, could cross it. */
double pg_fp8_draw(tu_rng *rng, ckjit_dtype dt, double scale);
/* The dequantized value of K (v 0) or V (v 1) head g's code. */
double pg_fp8_dequant(const pg_problem *p, int v, int64_t g, uint8_t code);
/* The codec on all 256 codes and against a nearest-value search, the
 * data drawn, and deliberately wrong scales caught by the comparison;
 * returns the failures. */
int pg_fp8_self_check(void);

/* ---- a problem on the device (paged_device.c) ------------------------------------------ */

/* Its buffers.  tab holds every int32 table, at the t_* offsets (elements):
 * the padded form, the CSR form, cu_seqlens_q, cu_seqlens_new, and a decoy
 * padded form (ids -3, lengths 7) that the CSR calls pass beside kv_indptr,
 * which must select CSR.  err is kv.error. */
typedef struct pg_dev {
  pg_problem *p;
  gt_buf pool[2], q, o, lse, newb, tab, err;
  gt_buf scale;                /* fp8: f32 K scales at 0, V scales at PG_SCALE_V; NaN elsewhere */
  int64_t t_bt, t_sl, t_ip, t_ix, t_ll, t_cq, t_cn, t_decoy_bt, t_decoy_sl;
} pg_dev;

/* Allocates and uploads everything (the pool as `before` the append when
 * the case appends, else `after`); with_pool 0: no pool buffers (the caller
 * has its own).  0, or -1 (a failure recorded in ck). */
int pg_dev_setup(gt_check *ck, pg_dev *v, pg_problem *p, int with_pool);
void pg_dev_free(pg_dev *v);
int pg_dev_upload_pool(gt_check *ck, pg_dev *v, int after);
int pg_dev_upload_tables(gt_check *ck, pg_dev *v);
/* The cache in padded (csr 0) or CSR form, error word included. */
ckjit_paged_kv pg_dev_kv(const pg_dev *v, int csr);
void pg_dev_desc(const pg_dev *v, int csr, ckjit_paged_attention_desc *d);
void pg_dev_append_desc(const pg_dev *v, int csr, ckjit_paged_kv_append_desc *a);
int pg_dev_set_error(gt_check *ck, pg_dev *v, int32_t value);
/* The error word, or -1000 when it cannot be read (recorded in ck). */
int32_t pg_dev_get_error(gt_check *ck, pg_dev *v);
/* Poisons O and LSE (device and mirrors). */
int pg_dev_poison_out(gt_check *ck, pg_dev *v);
/* Synchronizes, downloads O and LSE into their mirrors. */
int pg_dev_download_out(gt_check *ck, pg_dev *v);

/* O's and LSE's elements for check_out: 0 outside the tensor, 1 inside,
 * PG_MARK_ANY inside but undefined (a sequence with a bad table entry). */
#define PG_MARK_ANY 2
typedef struct pg_marks {
  uint8_t *o_in, *lse_in;
} pg_marks;
int pg_marks_make(pg_marks *m, const pg_dev *v);
void pg_marks_free(pg_marks *m);
/* O and LSE as downloaded: outside their elements still poison, inside
 * finite (LSE: -inf allowed); m NULL: everything poison (a refused call). */
void pg_check_out(gt_check *ck, const pg_dev *v, const pg_marks *m);

/* The rows compared with the reference and its answers. */
typedef struct pg_rows {
  att_rowid *ids;
  int64_t n;
  double *ref_o;
  att_row *ref;
} pg_rows;
/* All rows, or (sample > 0) that many random ones and each (b, h)'s first
 * and last; sequence skip_b (>= 0) left out.  0, or -1 (host memory). */
int pg_rows_make(pg_rows *r, const pg_problem *p, int sample, uint64_t seed, int threads, int64_t skip_b);
void pg_rows_free(pg_rows *r);
/* Compares the rows of O (and LSE when the case has it) in the mirrors. */
void pg_rows_compare(gt_check *ck, const pg_rows *r, const pg_dev *v);

/* ---- the other parts ------------------------------------------------------------------ */

/* The bad tables (paged_bad.c); returns the failures. */
long pg_run_bad_tables(gt_check *ck, uint64_t seed, unsigned required, int threads);

/* The pool past 4 GiB (paged_large.c); returns the failures. */
long pg_run_large(gt_check *ck, uint64_t seed, unsigned required, int threads);

/* A forced pipeline's UNSUPPORTED (test_paged_gpu.c): 1 when it is a refusal
 * to report and skip (must_run 0: pg_must_run said no), printed once per
 * pipeline and dtype; 0 when it is a failure. */
int pg_refused(int pipe, ckjit_dtype dt, int must_run);

#endif
