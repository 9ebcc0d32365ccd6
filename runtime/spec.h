/* Specializations: a kernel family plus its parameter values.
 *
 * The compact tuple `ckjit_spec` is what the in-memory cache is keyed on (no
 * source text is touched on a repeated call).  Its stable text form,
 * "family:key=value,...", is what tools, manifests and logs use. */
#ifndef CKJIT_RUNTIME_SPEC_H
#define CKJIT_RUNTIME_SPEC_H

#include <stddef.h>
#include <stdint.h>
#include "../base/buffer.h"
#include "ckjit/ckjit.h"

/* Attention and FP8 GEMM need more than the 20 the GEMM mma family filled;
 * `given` masks in spec.c are 32 bits wide. */
#define CKJIT_MAX_PARAMS 32
#define CKJIT_SPEC_TEXT_MAX 256

typedef enum ckjit_family_id {
  CKJIT_FAMILY_ELEMENTWISE = 0,
  CKJIT_FAMILY_TRANSPOSE = 1,
  CKJIT_FAMILY_REDUCE = 2,
  CKJIT_FAMILY_ROWNORM = 3,
  CKJIT_FAMILY_TOPK_SOFTMAX = 4,
  CKJIT_FAMILY_GEMM_MMA = 5,
  CKJIT_FAMILY_GEMM_SIMT = 6,
  CKJIT_FAMILY_GEMM_REDUCE = 7,
  CKJIT_FAMILY_GEMM_WGMMA = 8,
  CKJIT_FAMILY_GEMM_MFMA = 9,
  CKJIT_FAMILY_GEMM_TF32 = 10,
  CKJIT_FAMILY_ATTENTION_WGMMA = 11,
  CKJIT_FAMILY_ATTENTION_MMA = 12,
  CKJIT_FAMILY_ATTENTION_MFMA = 13,
  CKJIT_FAMILY_ATTENTION_SIMT = 14,
  CKJIT_FAMILY_PAGED_APPEND = 15,
  CKJIT_FAMILY_ATTENTION_DECODE = 16,
  CKJIT_FAMILY_ATTENTION_COMBINE = 17,
  CKJIT_FAMILY_GEMM_FP8 = 18,
  CKJIT_FAMILY_MOE_SORT = 19,
  CKJIT_FAMILY_MOE_PERMUTE = 20,
  CKJIT_FAMILY_COUNT_
} ckjit_family_id;

typedef struct ckjit_spec {
  uint32_t family;                 /* ckjit_family_id */
  int32_t value[CKJIT_MAX_PARAMS]; /* in the family's parameter order; unused = 0 */
} ckjit_spec;

/* A parameter is an integer, an enumeration or a type.  The spec renderer
 * writes one #define per parameter in front of the kernel template:
 *   integer  #define MACRO 128
 *   type     #define MACRO ckjit_half                (the value's C++ type)
 *   enum     #define CONSTANT i  for each value i, then  #define MACRO CONSTANT
 * MACRO is the name upper-cased unless `macro` gives it.  Enumerations come
 * from X-macro lists of (CONSTANT, name) in kernel_src/abi/ (see abi.h), the
 * one definition of their values, names and constants. */
typedef struct ckjit_param_desc {
  const char *name;           /* key in the text form */
  const char *macro;          /* its macro in the kernel source; NULL: the name upper-cased */
  const char *const *names;   /* enum and type: value names, NULL-terminated; NULL: integer */
  const char *const *symbols; /* enum: each value's constant */
  const char *const *types;   /* type: each value's C++ type */
  int32_t min, max;           /* integer: inclusive range */
  int32_t def;                /* default value (index for an enum or a type) */
} ckjit_param_desc;

#define CKJIT_INT_PARAM(NAME, MIN, MAX, DEF) {.name = (NAME), .min = (MIN), .max = (MAX), .def = (DEF)}
/* For an X-macro list of (CONSTANT, name): */
#define CKJIT_ENUM_CONSTANT(constant, name) constant,
#define CKJIT_ENUM_NAME(constant, name) #name,
#define CKJIT_ENUM_SYMBOL(constant, name) #constant,
/* static tables PREFIX_names and PREFIX_symbols of LIST, for CKJIT_ENUM_PARAM. */
#define CKJIT_ENUM_TABLES(PREFIX, LIST)                                      \
  static const char *const PREFIX##_names[] = {LIST(CKJIT_ENUM_NAME) NULL}; \
  static const char *const PREFIX##_symbols[] = {LIST(CKJIT_ENUM_SYMBOL) NULL};
/* For an X-macro list of (C++ type, name), e.g. CKJIT_FLOAT_DTYPES: */
#define CKJIT_TYPE_NAME(type, name) #name,
#define CKJIT_TYPE_CXX(type, name) #type,
#define CKJIT_ENUM_PARAM(NAME, PREFIX, DEF) \
  {.name = (NAME), .names = PREFIX##_names, .symbols = PREFIX##_symbols, .def = (DEF)}

typedef struct ckjit_family {
  const char *name;   /* "elementwise" */
  const char *source; /* template in kernel_src/ */
  const char *kernel; /* extern "C" kernel function name */
  int n_params;
  const ckjit_param_desc *params;
  /* Rejects invalid combinations with a message; NULL when all are valid. */
  ckjit_status (*check)(const ckjit_spec *spec);
  /* The index-th spec of the default (prewarm) set; returns 0 past its end. */
  int (*default_spec)(size_t index, ckjit_spec *out);
  /* Fills defaults that depend on other values (e.g. the widest vector for
   * the dtype) for the parameters not in `given` (bit i: parameter i was
   * written in the text).  NULL when every default is fixed. */
  void (*complete)(ckjit_spec *spec, unsigned given);
  /* Whether the kernel exists for `arch` (a valid arch name); NULL: for
   * every arch.  Elsewhere the source builds an empty kernel, which must
   * never be served; `targets_text` names the archs it runs on. */
  int (*targets)(const char *arch);
  const char *targets_text;
} ckjit_family;

/* The dtype parameter every family shares: f32, f16, bf16 (value 0, 1, 2;
 * CKJIT_FLOAT_DTYPES in kernel_src/abi/dtypes.h). */
extern const char *const ckjit__dtype_names[];
extern const char *const ckjit__dtype_types[];
#define CKJIT_DTYPE_PARAM_NAMED(NAME, DEF) \
  {.name = (NAME), .names = ckjit__dtype_names, .types = ckjit__dtype_types, .def = (DEF)}
#define CKJIT_DTYPE_PARAM CKJIT_DTYPE_PARAM_NAMED("dtype", 0)
int32_t ckjit__dtype_param_value(ckjit_dtype dtype); /* for f32, f16 or bf16 only */
size_t ckjit__dtype_param_size(int32_t value);        /* element bytes */

/* CKJIT_SUCCESS when the family of `spec` has a kernel for `arch` (a valid
 * arch name); otherwise sets the error (CKJIT_ERROR_UNSUPPORTED) and
 * returns it. */
ckjit_status ckjit__spec_targets(const ckjit_spec *spec, const char *arch);

/* The families' descriptors, each in runtime/ops/<family>/<family>_family.c
 * (the GEMM ones in runtime/ops/gemm/ and runtime/ops/gemm_fp8/, the attention ones in
 * runtime/ops/attention/attention_family.c). */
extern const ckjit_family ckjit__family_elementwise;
extern const ckjit_family ckjit__family_transpose;
extern const ckjit_family ckjit__family_reduce;
extern const ckjit_family ckjit__family_rownorm;
extern const ckjit_family ckjit__family_topk_softmax;
extern const ckjit_family ckjit__family_gemm_mma;
extern const ckjit_family ckjit__family_gemm_simt;
extern const ckjit_family ckjit__family_gemm_reduce;
extern const ckjit_family ckjit__family_gemm_wgmma;
extern const ckjit_family ckjit__family_gemm_mfma;
extern const ckjit_family ckjit__family_gemm_tf32;
extern const ckjit_family ckjit__family_attention_wgmma;
extern const ckjit_family ckjit__family_attention_mma;
extern const ckjit_family ckjit__family_attention_mfma;
extern const ckjit_family ckjit__family_attention_simt;
extern const ckjit_family ckjit__family_paged_append;
extern const ckjit_family ckjit__family_attention_decode;
extern const ckjit_family ckjit__family_attention_combine;
extern const ckjit_family ckjit__family_gemm_fp8;
extern const ckjit_family ckjit__family_moe_sort;
extern const ckjit_family ckjit__family_moe_permute;

const ckjit_family *ckjit__family_get(uint32_t id); /* NULL when out of range */

/* Parses "family:key=value,..." (omitted keys take defaults) and checks it. */
ckjit_status ckjit__spec_parse(const char *text, ckjit_spec *out);
/* Canonical text form (every key, in order). */
ckjit_status ckjit__spec_format(const ckjit_spec *spec, char *buf, size_t len);
/* Range and combination check of a spec built in code. */
ckjit_status ckjit__spec_check(const ckjit_spec *spec);
/* The specialized kernel source of `spec`. */
ckjit_status ckjit__spec_render(const ckjit_spec *spec, ckjit_buffer *source);

/* Cheap hash of the tuple for the in-memory table (not the cache key). */
static inline uint64_t ckjit__spec_hash(const ckjit_spec *s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s->family;
  for (int i = 0; i < CKJIT_MAX_PARAMS; i++) {
    h ^= (uint32_t)s->value[i];
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  return h;
}

static inline int ckjit__spec_equal(const ckjit_spec *a, const ckjit_spec *b) {
  if (a->family != b->family) return 0;
  for (int i = 0; i < CKJIT_MAX_PARAMS; i++)
    if (a->value[i] != b->value[i]) return 0;
  return 1;
}

#endif
