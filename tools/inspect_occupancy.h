/* Theoretical occupancy of a kernel from its resource use and per-arch
 * limits, the way the vendors' occupancy calculators count it.
 *
 * NVIDIA (cuda_occupancy.h's model; limits from the CUDA C Programming
 * Guide's compute-capability table, e.g. sm_90: 64K registers, 228 KB
 * shared memory per SM (227 KB per block), 2048 threads = 64 warps, 32
 * blocks, 1 KB shared memory reserved per block from sm_80 on):
 *   warps/block   = ceil(block / 32)
 *   by registers  registers are allocated per warp in units of 256 (regs x 32
 *                 rounded up) in 4 SM sub-partitions of 16K each:
 *                 floor(floor(16384 / regs_per_warp) * 4 / warps_per_block);
 *                 0 when regs_per_warp x (warps rounded up to 4) > 64K
 *   by shared     floor(smem_per_SM / roundup(static + reserve, 128))
 *                 (no dynamic shared memory: ckjit kernels use none); the
 *                 whole 228 KB carveout is assumed available
 *   by warps      floor(64 / warps_per_block);  by blocks: 32
 * AMD CDNA (LLVM AMDGPU's model; gfx90a/gfx94x: wave64, 4 SIMDs per CU,
 * 8 waves per SIMD, a unified 512-entry VGPR file per SIMD lane shared by
 * VGPRs and AGPRs (".vgpr_count" is already the unified total) allocated in
 * granules of 8, SGPR limits of GFX9 (<= 80: 10 waves, <= 88: 9, <= 100: 8,
 * else 7), 64 KB LDS per CU in 512-byte granules, at most 16 work-groups of
 * more than one wave per CU (barriers)):
 *   waves/WG      = ceil(block / wavefront)
 *   by VGPRs      waves_per_SIMD = min(8, floor(512 / roundup(vgpr, 8)));
 *                 WGs = floor(waves_per_SIMD x 4 / waves_per_WG)
 *                 (a work-group's waves spread over the 4 SIMDs)
 *   by LDS        floor(65536 / roundup(lds, 512))
 *   by waves      floor(32 / waves_per_WG);  by work-groups: 16 (32 when a
 *                 work-group is one wave)
 * Scratch (private segment) and dynamic LDS do not limit occupancy here.
 * An arch without a table gives no occupancy (known = 0) with the reason. */
#ifndef CKJIT_TOOLS_INSPECT_OCCUPANCY_H
#define CKJIT_TOOLS_INSPECT_OCCUPANCY_H

#include "inspect_codeobj.h"

typedef struct occupancy {
  int known;            /* 0: no limits table or missing counts (see note) */
  char note[160];
  int block;            /* threads per block used */
  int unit;             /* warp or wave size */
  int units_per_block;  /* warps (waves) per block (work-group) */
  int blocks;           /* resident blocks (work-groups) per SM (CU) */
  int units;            /* resident warps (waves) per SM (CU) */
  int max_units;        /* most warps (waves) per SM (CU) */
  double fraction;      /* units / max_units */
  double waves_per_simd;/* AMD: units / 4 */
  /* blocks allowed by each resource (-1: not limiting / not applicable) */
  int by_regs, by_sgprs, by_smem, by_units, by_blocks;
  const char *limiter;  /* "registers", "shared memory", "LDS", "warps", ... */
} occupancy;

/* Computes the occupancy of `k` compiled for `arch` ("sm_90", "gfx90a",
 * "gfx90a:xnack-", ...) launched with `block` threads per block.  Always
 * fills `out`; returns 0 when known, -1 otherwise. */
int occupancy_compute(const char *arch, const inspect_kernel *k, int block, occupancy *out);

/* Per-SM/CU limits of an arch, for reports.  NULL when unknown. */
typedef struct occupancy_limits {
  const char *arch;    /* base name: "sm_90", "gfx90a" */
  int vendor;          /* inspect_vendor */
  int unit;            /* warp / wave size */
  int max_units;       /* warps (waves) per SM (CU) */
  int max_blocks;      /* blocks (work-groups) per SM (CU) */
  int regs;            /* NVIDIA: 32-bit registers per SM; AMD: VGPRs per SIMD lane */
  int reg_granule;     /* NVIDIA: registers per warp allocation; AMD: VGPR granule */
  int max_regs_block;  /* NVIDIA: registers per block */
  int smem;            /* shared memory / LDS bytes per SM (CU) */
  int smem_block;      /* most per block */
  int smem_granule;
  int smem_reserved;   /* per block (NVIDIA sm_80+) */
  int simds;           /* AMD: SIMDs per CU; NVIDIA: sub-partitions */
  int waves_per_simd;  /* AMD */
  int separate_agprs;  /* AMD gfx908: AGPRs in their own file of `regs` */
} occupancy_limits;

const occupancy_limits *occupancy_limits_for(const char *arch);

#endif
