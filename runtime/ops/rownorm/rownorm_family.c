/* The rownorm kernel family (kernel_src/rows/rownorm.cu): parameters, spec
 * checks and the default set. */
#include <string.h>

#include "abi/rownorm_args.h"
#include "base/error.h"
#include "base/int_math.h"
#include "rownorm.h"
#include "runtime/ops/op_frame.h"
#include "runtime/spec.h"

CKJIT_ENUM_TABLES(op, CKJIT_ROWNORM_OPS)
CKJIT_ENUM_TABLES(qtype, CKJIT_ROWNORM_QTYPES)
CKJIT_ENUM_TABLES(affine, CKJIT_ROWNORM_AFFINES)
CKJIT_ENUM_TABLES(pass, CKJIT_ROWNORM_PASSES)

static const ckjit_param_desc params[RN_PARAM_COUNT] = {
    [RN_DTYPE] = CKJIT_DTYPE_PARAM,
    [RN_OP] = CKJIT_ENUM_PARAM("op", op, 0),
    [RN_QTYPE] = CKJIT_ENUM_PARAM("qtype", qtype, 0),
    [RN_RESIDUAL] = CKJIT_INT_PARAM("residual", 0, 1, 0),
    [RN_AFFINE] = CKJIT_ENUM_PARAM("affine", affine, 0),
    [RN_THREADS] = CKJIT_INT_PARAM("threads", 64, 1024, 256),
    [RN_ROW_THREADS] = CKJIT_INT_PARAM("row_threads", 1, 1024, 256),
    [RN_VEC] = CKJIT_INT_PARAM("vec", 1, 8, 8),
    [RN_ITEMS] = CKJIT_INT_PARAM("items", 1, 32, 4),
    [RN_PASS] = CKJIT_ENUM_PARAM("pass", pass, 0),
    /* Resident threads per SM the compiler must allow (NVIDIA; 0: no bound). */
    [RN_OCCUPANCY] = CKJIT_INT_PARAM("occupancy", 0, 2048, 1024),
    /* Fused pass: the tile waits in shared memory instead of registers. */
    [RN_SMEM_TILE] = CKJIT_INT_PARAM("smem_tile", 0, 1, 0),
};

static ckjit_status bad(const char *what, const ckjit_spec *s) {
  return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: rownorm op=%s: %s",
                     op_names[s->value[RN_OP]], what);
}

static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  int op = v[RN_OP];
  if (!ckjit__is_pow2(v[RN_THREADS]) || v[RN_THREADS] % 64)
    return bad("threads must be a power of two and a multiple of 64", s);
  if (!ckjit__is_pow2(v[RN_ROW_THREADS]) || v[RN_ROW_THREADS] > v[RN_THREADS])
    return bad("row_threads must be a power of two no larger than threads", s);
  if (!ckjit__is_pow2(v[RN_VEC]) || (size_t)v[RN_VEC] * ckjit__dtype_param_size(v[RN_DTYPE]) > 16)
    return bad("vec must be a power of two of at most 16 bytes", s);
  if (v[RN_VEC] * v[RN_ITEMS] > CKJIT_ROWNORM_MAX_VALUES_PER_THREAD)
    return bad("vec * items must be at most 32 (values per thread in registers)", s);
  if ((v[RN_QTYPE] != Q_NONE) != ckjit__rownorm_is_quant(op))
    return bad("qtype is required by the quantizing ops and only by them", s);
  if (v[RN_RESIDUAL] && !ckjit__rownorm_is_norm(op)) return bad("residual is for the norms only", s);
  if (v[RN_AFFINE] == AFFINE_WEIGHT_BIAS && op != OP_LAYERNORM)
    return bad("a bias is for layernorm only", s);
  if (v[RN_AFFINE] != AFFINE_NONE && !ckjit__rownorm_is_norm(op))
    return bad("weights are for the norms only", s);
  if (v[RN_PASS] != PASS_FUSED && v[RN_ROW_THREADS] != v[RN_THREADS])
    return bad("split passes take one row per block (row_threads = threads)", s);
  if (v[RN_PASS] == PASS_AMAX && op != OP_RMSNORM_QUANT)
    return bad("pass=amax is for rmsnorm_quant only", s);
  if (v[RN_OCCUPANCY] % 256)
    return bad("occupancy must be a multiple of 256 threads", s);
  if (v[RN_SMEM_TILE] && (v[RN_PASS] != PASS_FUSED ||
                          (int64_t)v[RN_THREADS] * v[RN_ITEMS] * v[RN_VEC] *
                                  (int64_t)ckjit__dtype_param_size(v[RN_DTYPE]) > 32768))
    return bad("smem_tile is for pass=fused with a tile of at most 32 KiB", s);
  return CKJIT_SUCCESS;
}

/* An omitted vec is the widest vector of the dtype (at most 8), as the
 * policy picks for aligned operands. */
static void complete(ckjit_spec *s, unsigned given) {
  if (!(given & (1u << RN_VEC)))
    s->value[RN_VEC] = ckjit__widest_vec(ckjit__dtype_param_size(s->value[RN_DTYPE]), 8);
}

/* Default set, per dtype: each op on the fused path for rows of up to 256
 * threads x 4 vectors (8192 columns of a 16-bit type); layernorm and
 * rmsnorm with their shared-memory tile; then the split passes of each op
 * (stats, [amax,] apply), so that every kernel the policy can pick is
 * compiled by `ckjit-prewarm --all` and by CI for every arch. */
static const struct default_row {
  int op, pass, smem;
} default_rows[] = {
    {OP_SOFTMAX, PASS_FUSED, 0},       {OP_LOG_SOFTMAX, PASS_FUSED, 0},
    {OP_LAYERNORM, PASS_FUSED, 0},     {OP_RMSNORM, PASS_FUSED, 0},
    {OP_RMSNORM_QUANT, PASS_FUSED, 0}, {OP_SMOOTHQUANT, PASS_FUSED, 0},
    {OP_LAYERNORM, PASS_FUSED, 1},     {OP_RMSNORM, PASS_FUSED, 1},
    {OP_SOFTMAX, PASS_STATS, 0},       {OP_SOFTMAX, PASS_APPLY, 0},
    {OP_LOG_SOFTMAX, PASS_APPLY, 0},   {OP_LAYERNORM, PASS_STATS, 0},
    {OP_LAYERNORM, PASS_APPLY, 0},     {OP_RMSNORM, PASS_STATS, 0},
    {OP_RMSNORM, PASS_APPLY, 0},       {OP_RMSNORM_QUANT, PASS_STATS, 0},
    {OP_RMSNORM_QUANT, PASS_AMAX, 0},  {OP_RMSNORM_QUANT, PASS_APPLY, 0},
    {OP_SMOOTHQUANT, PASS_STATS, 0},   {OP_SMOOTHQUANT, PASS_APPLY, 0},
};

static int default_spec(size_t index, ckjit_spec *out) {
  const size_t n = sizeof default_rows / sizeof default_rows[0];
  if (index >= 3 * n) return 0;
  const struct default_row *d = &default_rows[index % n];
  int dtype = (int)(index / n), op = d->op;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_ROWNORM;
  int32_t *v = out->value;
  v[RN_DTYPE] = dtype;
  v[RN_OP] = op;
  v[RN_QTYPE] = ckjit__rownorm_is_quant(op) ? Q_I8 : Q_NONE;
  v[RN_RESIDUAL] = op == OP_RMSNORM_QUANT && d->pass <= PASS_STATS;
  v[RN_AFFINE] = op == OP_LAYERNORM ? AFFINE_WEIGHT_BIAS
                 : ckjit__rownorm_is_norm(op) ? AFFINE_WEIGHT : AFFINE_NONE;
  v[RN_THREADS] = 256;
  v[RN_ROW_THREADS] = 256;
  v[RN_VEC] = ckjit__widest_vec(ckjit__dtype_param_size(dtype), 8);
  v[RN_ITEMS] = 4;
  v[RN_PASS] = d->pass;
  v[RN_OCCUPANCY] = d->smem ? 1536 : 1024;
  v[RN_SMEM_TILE] = d->smem;
  return 1;
}

const ckjit_family ckjit__family_rownorm = {
    .name = "rownorm",
    .source = "rows/rownorm.cu",
    .kernel = "ckjit_rownorm",
    .n_params = RN_PARAM_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
    .complete = complete,
};
