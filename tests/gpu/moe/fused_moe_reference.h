/* The host side of the fused-MoE GPU suite (test_fused_moe_gpu.c, whose
 * opening comment states the definition, the data and the tolerance): a
 * case, its problem generated on the host, the OCP e4m3 codec, and the
 * float64 reference of chosen tokens' outputs as an interval [lo, hi] per
 * element that a device following ckjit/moe.h lands in (fused_moe_reference.c
 * derives it stage by stage).  fm_self_check runs the reference against a
 * simulated device in f32, honest (it must pass) and with planted bugs
 * (each must fail), and checks the codec and the data's exactness premises. */
#ifndef CKJIT_TESTS_GPU_MOE_FUSED_MOE_REFERENCE_H
#define CKJIT_TESTS_GPU_MOE_FUSED_MOE_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

#include "ckjit/ckjit.h"
#include "gpu_harness.h"

/* Routings (fm_route). */
enum {
  FM_UNIFORM,    /* distinct experts per token (k <= experts) */
  FM_ONE_EXPERT, /* every slot on one expert (k > 1: the same expert twice) */
  FM_FEW,        /* ids from 3 experts only: the others get no token */
  FM_INVALID,    /* ~1 in 8 ids out of range (-1, experts, huge): contribute nothing */
  FM_ROUTINGS
};

typedef struct fm_case {
  const char *name;
  int64_t tokens, hidden, inter;
  int experts, k;
  ckjit_dtype dtype;          /* x, y (and 16-bit weights): CKJIT_BF16 or CKJIT_F16 */
  ckjit_dtype wdt;            /* the weights: dtype or CKJIT_FP8_E4M3 */
  ckjit_fp8_scaling sc;       /* FP8: CKJIT_FP8_SCALE_ROW or CKJIT_FP8_SCALE_BLOCK */
  ckjit_unary_op act;         /* SILU, GELU_TANH or GELU_ERF */
  ckjit_dtype ids;            /* CKJIT_I32 or CKJIT_I64 */
  int routing;                /* FM_* */
  int ldx_pad, ldy_pad;       /* ldx = hidden + ldx_pad (multiples of 8) */
  int sample;                 /* > 0: that many tokens (plus the first and last) checked */
  int random_data;            /* 16-bit: x and w_gate_up uniform instead of exact (below) */
  int zero_groups;            /* FP8: some activation rows (ROW) / 128-blocks (BLOCK) all zero */
  int twice;                  /* run again: y must be bit-identical */
  int no_invalid;             /* pass desc.invalid NULL */
  int large;                  /* skipped under CKJIT_TEST_SKIP_LARGE=1 */
} fm_case;

/* One problem on the host: every array as the device sees it. */
typedef struct fm_host {
  const fm_case *c;
  int64_t ldx;
  int64_t kb1, kb2;           /* ceil(hidden / 128), ceil(inter / 128): K blocks of each GEMM */
  int64_t nb1, nb2;           /* ceil(2 inter / 128), ceil(hidden / 128): N blocks (BLOCK scales) */
  size_t w1_elems, w2_elems, s1_elems, s2_elems;
  uint8_t *x;                 /* dtype [tokens][ldx], NaN in the padding */
  int64_t *ids;               /* [tokens][k] */
  float *tw;                  /* [tokens][k] */
  const double *tw_err;       /* NULL, or [tokens][k]: each weight known within +- this (a gated
                                 shared expert's gate, which the device computes itself) and
                                 multiplying the product rounded to dtype, not the product */
  uint8_t *w1, *w2;           /* dtype elements, or e4m3 codes */
  float *s1, *s2;             /* FP8 scales (NULL for 16-bit weights) */
  float *dec16;               /* the 65536 values of dtype's bit patterns */
  uint16_t *gen_tab;          /* the 16-bit weight generators' tables */
} fm_host;

/* Generates x, the weights and their scales (`threads` threads; the data
 * depend on seed only) and the routing c->routing.  0 on success. */
int fm_host_make(fm_host *p, const fm_case *c, uint64_t seed, int threads);
void fm_host_free(fm_host *p);

/* A new routing of kind `routing` (FM_*): ids and weights. */
void fm_route(fm_host *p, int routing, tu_rng *r);

/* Entries whose id is outside 0 .. experts - 1. */
int64_t fm_invalid_count(const fm_host *p);

/* Whether token t has no valid id (its y row must be 0). */
int fm_all_invalid(const fm_host *p, int64_t t);

/* The reference of tokens tok[0 .. n): for each, hidden elements of lo, hi
 * (the interval a correct device's y lands in) and ref (the nominal value). */
void fm_reference(const fm_host *p, const int64_t *tok, int64_t n, double *lo, double *hi, double *ref,
                  int threads);

/* OCP e4m3fn: the value of a code; the code of t (round to nearest even,
 * saturating to +-448, NaN to 0x7F). */
double fm_e4m3_value(uint8_t code);
uint8_t fm_e4m3_encode(double t);

/* Absolute slack below lo and above hi: f16's subnormal spacing, else ~0. */
static inline double fm_atol(ckjit_dtype dt) { return dt == CKJIT_F16 ? 0x1p-24 : 1e-37; }

/* The codec, the data premises and the reference against simulated
 * devices; returns the failures (printed). */
int fm_self_check(void);

const char *fm_routing_name(int routing);

#endif
