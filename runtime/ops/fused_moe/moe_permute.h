/* The moe_permute kernel family (kernel_src/moe/moe_permute.cu): its
 * parameters, shared by the family descriptor and ckjit_fused_moe. */
#ifndef CKJIT_RUNTIME_OPS_MOE_PERMUTE_H
#define CKJIT_RUNTIME_OPS_MOE_PERMUTE_H

#include "abi/moe_permute_args.h"
#include "runtime/spec.h"

/* dir: gather or combine; dtype: the rows' (f16 or bf16); quant: gather's
 * e4m3 quantization; ids: combine's topk_ids type; shared: combine adds
 * shared experts' rows, plain or gated (CKJIT_MOE_SHARED_*; a spec of its
 * own: the plain combine keeps the code it had before them). */
enum { MP_DIR, MP_DTYPE, MP_QUANT, MP_IDS, MP_SHARED, MP_COUNT };
enum { CKJIT_MOE_PERMUTE_DIRS(CKJIT_ENUM_CONSTANT) };
enum { CKJIT_MOE_PERMUTE_QUANTS(CKJIT_ENUM_CONSTANT) };
enum { CKJIT_MOE_PERMUTE_IDS(CKJIT_ENUM_CONSTANT) };

#endif
