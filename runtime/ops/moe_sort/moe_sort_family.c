/* The moe_sort kernel family (kernel_src/moe/moe_sort.cu): parameters,
 * spec checks and the default set. */
#include <string.h>

#include "base/error.h"
#include "base/int_math.h"
#include "moe_sort.h"

CKJIT_ENUM_TABLES(moe_ids, CKJIT_MOE_SORT_IDS)

static const ckjit_param_desc params[MS_COUNT] = {
    [MS_IDS] = {.name = "ids", .macro = "IDS_TYPE", .names = moe_ids_names, .symbols = moe_ids_symbols},
    [MS_THREADS] = CKJIT_INT_PARAM("threads", 64, 1024, 256),
    [MS_MAP] = CKJIT_INT_PARAM("map", 0, 1, 0),
};

static ckjit_status check(const ckjit_spec *s) {
  if (!ckjit__is_pow2(s->value[MS_THREADS]))
    return ckjit__fail(CKJIT_ERROR_INVALID_ARGUMENT, "spec: moe_sort threads=%d must be a power of two",
                       s->value[MS_THREADS]);
  return CKJIT_SUCCESS;
}

/* Default set: both id types, with and without an expert map, 256 threads
 * (the front-end's choice). */
static int default_spec(size_t index, ckjit_spec *out) {
  if (index >= 4) return 0;
  memset(out, 0, sizeof *out);
  out->family = CKJIT_FAMILY_MOE_SORT;
  out->value[MS_IDS] = (int32_t)(index % 2);
  out->value[MS_THREADS] = 256;
  out->value[MS_MAP] = (int32_t)(index / 2);
  return 1;
}

const ckjit_family ckjit__family_moe_sort = {
    .name = "moe_sort",
    .source = "moe/moe_sort.cu",
    .kernel = "ckjit_moe_sort",
    .n_params = MS_COUNT,
    .params = params,
    .check = check,
    .default_spec = default_spec,
};
