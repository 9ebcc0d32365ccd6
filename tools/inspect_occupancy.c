#include "inspect_occupancy.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* NVIDIA: CUDA C Programming Guide, "Technical Specifications per Compute
 * Capability"; register file 64K x 32-bit per SM, 4 sub-partitions,
 * 256-register allocation unit per warp, 64K registers per block.
 * AMD: LLVM AMDGPU (AMDGPUBaseInfo: getTotalNumVGPRs, getVGPRAllocGranule,
 * getMaxWavesPerEU, getMaxWorkGroupsPerCU), the CDNA2/CDNA3 ISA guides. */
static const occupancy_limits table[] = {
    /* arch     vendor        unit warps blocks regs  gran maxblk smem    smblk   sg  res  sub w agpr */
    {"sm_70", INSPECT_NVIDIA, 32, 64, 32, 65536, 256, 65536, 98304, 98304, 256, 0, 4, 0, 0},
    {"sm_75", INSPECT_NVIDIA, 32, 32, 16, 65536, 256, 65536, 65536, 65536, 256, 0, 4, 0, 0},
    {"sm_80", INSPECT_NVIDIA, 32, 64, 32, 65536, 256, 65536, 167936, 166912, 128, 1024, 4, 0, 0},
    {"sm_86", INSPECT_NVIDIA, 32, 48, 16, 65536, 256, 65536, 102400, 101376, 128, 1024, 4, 0, 0},
    {"sm_89", INSPECT_NVIDIA, 32, 48, 24, 65536, 256, 65536, 102400, 101376, 128, 1024, 4, 0, 0},
    {"sm_90", INSPECT_NVIDIA, 32, 64, 32, 65536, 256, 65536, 233472, 232448, 128, 1024, 4, 0, 0},
    {"sm_100", INSPECT_NVIDIA, 32, 64, 32, 65536, 256, 65536, 233472, 232448, 128, 1024, 4, 0, 0},
    /* AMD: regs = VGPRs per lane per SIMD; max_units = waves per CU */
    {"gfx900", INSPECT_AMD, 64, 40, 40, 256, 4, 0, 65536, 65536, 512, 0, 4, 10, 0},
    {"gfx906", INSPECT_AMD, 64, 40, 40, 256, 4, 0, 65536, 65536, 512, 0, 4, 10, 0},
    {"gfx908", INSPECT_AMD, 64, 40, 40, 256, 4, 0, 65536, 65536, 512, 0, 4, 10, 1},
    {"gfx90a", INSPECT_AMD, 64, 32, 32, 512, 8, 0, 65536, 65536, 512, 0, 4, 8, 0},
    {"gfx940", INSPECT_AMD, 64, 32, 32, 512, 8, 0, 65536, 65536, 512, 0, 4, 8, 0},
    {"gfx941", INSPECT_AMD, 64, 32, 32, 512, 8, 0, 65536, 65536, 512, 0, 4, 8, 0},
    {"gfx942", INSPECT_AMD, 64, 32, 32, 512, 8, 0, 65536, 65536, 512, 0, 4, 8, 0},
};

const occupancy_limits *occupancy_limits_for(const char *arch) {
  char base[32];
  size_t n = 0;
  if (!arch) return NULL;
  if (!strncmp(arch, "sm_", 3)) {
    n = 3;
    while (arch[n] >= '0' && arch[n] <= '9') n++; /* sm_90a -> sm_90 */
  } else {
    n = strcspn(arch, ":"); /* gfx90a:xnack- -> gfx90a */
  }
  if (n >= sizeof base) return NULL;
  memcpy(base, arch, n);
  base[n] = '\0';
  for (size_t i = 0; i < sizeof table / sizeof *table; i++)
    if (!strcmp(table[i].arch, base)) return &table[i];
  return NULL;
}

static int round_up(int v, int g) { return g > 0 ? (v + g - 1) / g * g : v; }
static int div_up(int v, int d) { return (v + d - 1) / d; }

/* Takes the tightest of the limits; ties keep the first named. */
static void take(occupancy *o, int blocks, const char *what) {
  if (blocks < 0) return;
  if (o->blocks < 0 || blocks < o->blocks) {
    o->blocks = blocks;
    o->limiter = what;
  }
}

static int unknown(occupancy *o, const char *fmt, const char *arg) {
  o->known = 0;
  snprintf(o->note, sizeof o->note, fmt, arg);
  return -1;
}

/* GFX9 SGPR occupancy (LLVM getOccupancyWithNumSGPRs for VI..GFX9). */
static int waves_by_sgprs(int64_t sgprs) {
  if (sgprs <= 80) return 10;
  if (sgprs <= 88) return 9;
  if (sgprs <= 100) return 8;
  return 7;
}

static int nvidia(const occupancy_limits *L, const inspect_kernel *k, occupancy *o) {
  if (k->regs < 0) return unknown(o, "%s", "the register count is unknown");
  o->unit = L->unit;
  o->units_per_block = div_up(o->block, L->unit);
  o->max_units = L->max_units;
  /* Registers. */
  int regs_per_warp = round_up((int)(k->regs > 0 ? k->regs : 1) * L->unit, L->reg_granule);
  int assumed = regs_per_warp * round_up(o->units_per_block, L->simds); /* hardware check */
  if (assumed > L->max_regs_block || regs_per_warp * o->units_per_block > L->max_regs_block) {
    o->by_regs = 0;
  } else {
    int warps = (L->regs / L->simds) / regs_per_warp * L->simds;
    o->by_regs = warps / o->units_per_block;
  }
  /* Shared memory (the reserve counts from sm_80 on). */
  int64_t smem = (k->lds_bytes > 0 ? k->lds_bytes : 0) + L->smem_reserved;
  int alloc = round_up((int)smem, L->smem_granule);
  if (k->lds_bytes > L->smem_block) o->by_smem = 0;
  else o->by_smem = alloc > 0 ? L->smem / alloc : -1;
  o->by_units = L->max_units / o->units_per_block;
  o->by_blocks = L->max_blocks;
  take(o, o->by_units, "warps");
  take(o, o->by_blocks, "blocks");
  take(o, o->by_regs, "registers");
  take(o, o->by_smem, "shared memory");
  return 0;
}

static int amd(const occupancy_limits *L, const inspect_kernel *k, occupancy *o) {
  if (k->vgpr < 0) return unknown(o, "%s", "the VGPR count is unknown");
  int wave = k->wavefront > 0 ? (int)k->wavefront : L->unit;
  o->unit = wave;
  o->units_per_block = div_up(o->block, wave);
  o->max_units = L->waves_per_simd * L->simds;
  /* VGPRs (and AGPRs where they have their own file). */
  int vgprs = round_up((int)(k->vgpr > 0 ? k->vgpr : 1), L->reg_granule);
  int per_simd = L->regs / vgprs;
  if (L->separate_agprs && k->agpr > 0) {
    int by_agpr = L->regs / round_up((int)k->agpr, L->reg_granule);
    if (by_agpr < per_simd) per_simd = by_agpr;
  }
  if (per_simd > L->waves_per_simd) per_simd = L->waves_per_simd;
  o->by_regs = per_simd * L->simds / o->units_per_block;
  /* SGPRs (GFX9). */
  if (k->sgpr >= 0) {
    int s = waves_by_sgprs(k->sgpr);
    if (s > L->waves_per_simd) s = L->waves_per_simd;
    o->by_sgprs = s * L->simds / o->units_per_block;
  }
  /* LDS. */
  int64_t lds = k->lds_bytes > 0 ? k->lds_bytes : 0;
  if (lds > L->smem_block) o->by_smem = 0;
  else o->by_smem = lds > 0 ? L->smem / round_up((int)lds, L->smem_granule) : -1;
  o->by_units = o->max_units / o->units_per_block;
  o->by_blocks = o->units_per_block > 1 ? 16 : o->max_units;
  take(o, o->by_units, "waves");
  take(o, o->by_blocks, "work-groups (barriers)");
  take(o, o->by_regs, "VGPRs");
  take(o, o->by_sgprs, "SGPRs");
  take(o, o->by_smem, "LDS");
  return 0;
}

int occupancy_compute(const char *arch, const inspect_kernel *k, int block, occupancy *o) {
  memset(o, 0, sizeof *o);
  o->blocks = -1;
  o->by_regs = o->by_sgprs = o->by_smem = o->by_units = o->by_blocks = -1;
  o->block = block;
  const occupancy_limits *L = occupancy_limits_for(arch);
  if (!L) return unknown(o, "no occupancy limits table for %s", arch ? arch : "(null)");
  if (block < 1 || block > 1024) return unknown(o, "%s", "block size out of range");
  if ((int)L->vendor != (int)k->vendor)
    return unknown(o, "the code object is not for %s", arch);
  int rc = L->vendor == INSPECT_NVIDIA ? nvidia(L, k, o) : amd(L, k, o);
  if (rc) return rc;
  if (o->blocks < 0) o->blocks = 0;
  o->units = o->blocks * o->units_per_block;
  if (o->units > o->max_units) o->units = o->max_units;
  o->fraction = o->max_units ? (double)o->units / o->max_units : 0;
  o->waves_per_simd = L->vendor == INSPECT_AMD ? (double)o->units / L->simds : 0;
  o->known = 1;
  if (o->blocks == 0)
    snprintf(o->note, sizeof o->note, "cannot launch: %s exceed the per-block limit", o->limiter);
  return 0;
}
