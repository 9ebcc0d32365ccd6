/* The moe_permute kernel family (kernel_src/moe/moe_permute.cu):
 * parameters, spec checks and the default set. */
#include <string.h>

#include "base/error.h"
#include "moe_permute.h"

CKJIT_ENUM_TABLES(mp_dir, CKJIT_MOE_PERMUTE_DIRS)
CKJIT_ENUM_TABLES(mp_quant, CKJIT_MOE_PERMUTE_QUANTS)
CKJIT_ENUM_TABLES(mp_ids, CKJIT_MOE_PERMUTE_IDS)

#define DTYPE_F16 1
#define DTYPE_BF16 2

static const ckjit_param_desc params[MP_COUNT] = {
    [MP_DIR] = CKJIT_ENUM_PARAM("dir", mp_dir, 0),
    [MP_DTYPE] = CKJIT_DTYPE_PARAM_NAMED("dtype", DTYPE_BF16),
    [MP_QUANT] = CKJIT_ENUM_PARAM("quant", mp_quant, 0),
    [MP_IDS] = {.name = "ids", .macro = "IDS_TYPE", .names = mp_ids_names, .symbols = mp_ids_symbols},
    [MP_SHARED] = {.name = "shared", .macro = "SHARED", .max = CKJIT_MOE_SHARED_GATED}, /* CKJIT_MOE_SHARED_* */
};

static ckjit_status check(const ckjit_spec *s) {
  const int32_t *v = s->value;
  if (v[MP_DTYPE] != DTYPE_F16 && v[MP_DTYPE] != DTYPE_BF16)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: moe_permute dtype must be f16 or bf16");
  if (v[MP_DIR] == DIR_COMBINE && v[MP_QUANT] != QUANT_NONE)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: moe_permute dir=combine takes quant=none");
  if (v[MP_SHARED] && v[MP_DIR] != DIR_COMBINE)
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: moe_permute shared=%d takes dir=combine", v[MP_SHARED]);
  return CKJIT_SUCCESS;
}

/* Default set: ckjit_fused_moe's kernels for bf16 and f16 rows: gather
 * unquantized, per row and per block; combine with int32 and int64 ids,
 * and with shared experts, plain and gated (int32 ids). */
static int default_spec(size_t index, ckjit_spec *out) {
  static const struct { int dir, quant, ids, shared; } set[] = {
      {DIR_GATHER, QUANT_NONE, 0, 0}, {DIR_GATHER, QUANT_ROW, 0, 0}, {DIR_GATHER, QUANT_BLOCK, 0, 0},
      {DIR_COMBINE, QUANT_NONE, PIDS_I32, 0}, {DIR_COMBINE, QUANT_NONE, PIDS_I64, 0},
      {DIR_COMBINE, QUANT_NONE, PIDS_I32, CKJIT_MOE_SHARED_PLAIN},
      {DIR_COMBINE, QUANT_NONE, PIDS_I32, CKJIT_MOE_SHARED_GATED},
  };
  const size_t n = sizeof set / sizeof set[0];
  if (index >= 2 * n) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_MOE_PERMUTE;
  out->value[MP_DIR] = set[index % n].dir;
  out->value[MP_DTYPE] = index < n ? DTYPE_BF16 : DTYPE_F16;
  out->value[MP_QUANT] = set[index % n].quant;
  out->value[MP_IDS] = set[index % n].ids;
  out->value[MP_SHARED] = set[index % n].shared;
  return 1;
}

const ckjit_family ckjit__family_moe_permute = {
    .name = "moe_permute",
    .source = "moe/moe_permute.cu",
    .kernel = "ckjit_moe_permute",
    .n_params = MP_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
};
