/* Arch names are checked before they reach a compiler, in two steps.
 *
 * Before the disk lookup, ckjit__arch_validate checks what costs nothing:
 * the syntax, and for AMD a table of processors and features, because
 * Debian's hipRTC 5.2 aborts the whole process on targets it does not know
 * (gfx940, gfx942, gfx1100), so "let the compiler decide" is not safe there.
 *
 * NVIDIA names are judged by the loaded NVRTC itself (ckjit__arch_check_nvrtc,
 * with the list nvrtcGetSupportedArchs reports), right before a compile: a
 * warm start must not load NVRTC, and it need not, since an arch that NVRTC
 * cannot compile for never has a cache entry under that NVRTC's fingerprint
 * (part of every key). */
#include "arch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"

/* AMD processors, the first HIP version (major*100+minor) whose hipRTC
 * compiles for them, and the target features they have (LLVM's AMDGPU
 * processor table).  Debian's hipRTC 5.2 also aborts on a feature the
 * processor lacks ("gfx1030:xnack-"), so features are checked too.  The 5.x
 * entries were each compiled with Debian's HIP 5.2.3. */
enum { XNACK = 1, SRAMECC = 2 };
static const struct { const char *name; int since; int features; } hip_archs[] = {
    {"gfx803", 500, 0},           {"gfx900", 500, XNACK},         {"gfx906", 500, XNACK | SRAMECC},
    {"gfx908", 500, XNACK | SRAMECC}, {"gfx90a", 500, XNACK | SRAMECC}, {"gfx90c", 500, XNACK},
    {"gfx1010", 500, XNACK},      {"gfx1011", 500, XNACK},        {"gfx1012", 500, XNACK},
    {"gfx1030", 500, 0},          {"gfx1031", 500, 0},            {"gfx1032", 500, 0},
    {"gfx1034", 500, 0},          {"gfx1035", 500, 0},            {"gfx940", 600, XNACK | SRAMECC},
    {"gfx941", 600, XNACK | SRAMECC}, {"gfx942", 600, XNACK | SRAMECC}, {"gfx1100", 600, 0},
    {"gfx1101", 600, 0},          {"gfx1102", 600, 0},            {"gfx950", 604, XNACK | SRAMECC},
    {"gfx1200", 603, 0},          {"gfx1201", 603, 0},
};

static int parse_cuda(const char *arch, int *cc, int *suffix) {
  if (strncmp(arch, "sm_", 3)) return -1;
  const char *p = arch + 3;
  int v = 0, digits = 0;
  while (*p >= '0' && *p <= '9' && digits < 4) v = v * 10 + (*p++ - '0'), digits++;
  if (digits < 2 || digits > 3) return -1;
  *suffix = 0;
  if (*p == 'a' || *p == 'f') *suffix = *p++;
  if (*p) return -1;
  *cc = v;
  return 0;
}

/* "gfxNNN[:feature(+|-)]*" with features sramecc and xnack, each at most
 * once, in any order: `features` gets the features named, `enabled` those
 * with '+'. */
static int parse_hip(const char *arch, char *base, size_t len, int *features, int *enabled) {
  if (strncmp(arch, "gfx", 3)) return -1;
  const char *p = arch + 3;
  size_t n = 0;
  while ((p[n] >= '0' && p[n] <= '9') || (p[n] >= 'a' && p[n] <= 'f')) n++;
  if (n < 3 || n > 4 || 3 + n >= len) return -1;
  memcpy(base, arch, 3 + n);
  base[3 + n] = '\0';
  p += n;
  *features = *enabled = 0;
  while (*p == ':') {
    p++;
    int f;
    if (!strncmp(p, "sramecc", 7)) f = SRAMECC, p += 7;
    else if (!strncmp(p, "xnack", 5)) f = XNACK, p += 5;
    else return -1;
    if ((*features & f) || (*p != '+' && *p != '-')) return -1;
    *features |= f;
    if (*p == '+') *enabled |= f;
    p++;
  }
  return *p ? -1 : 0;
}

ckjit_backend ckjit__arch_vendor(const char *arch) {
  char base[16];
  int cc, suffix, features, enabled;
  if (!arch || strlen(arch) >= CKJIT_ARCH_MAX) return CKJIT_BACKEND_AUTO;
  if (!parse_cuda(arch, &cc, &suffix)) return CKJIT_BACKEND_CUDA;
  if (!parse_hip(arch, base, sizeof base, &features, &enabled)) return CKJIT_BACKEND_HIP;
  return CKJIT_BACKEND_AUTO;
}

/* LLVM's target-ID form: the processor, then its features sorted by name
 * (sramecc before xnack).  Keys, entry metadata and records are made from
 * it, so one target never gets two cache entries. */
const char *ckjit__arch_canonical(const char *arch, char out[CKJIT_ARCH_MAX]) {
  char base[16];
  int features, enabled;
  if (!arch || strlen(arch) >= CKJIT_ARCH_MAX ||
      parse_hip(arch, base, sizeof base, &features, &enabled))
    return arch; /* CUDA names have one spelling; a malformed one is refused as given */
  snprintf(out, CKJIT_ARCH_MAX, "%s%s%s", base,
           features & SRAMECC ? (enabled & SRAMECC ? ":sramecc+" : ":sramecc-") : "",
           features & XNACK ? (enabled & XNACK ? ":xnack+" : ":xnack-") : "");
  return out;
}

ckjit_status ckjit__arch_validate(const char *arch, int major, int minor) {
  if (!arch || !*arch) return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "arch: empty arch name");
  if (strlen(arch) >= CKJIT_ARCH_MAX)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "arch: name too long (%zu characters)",
                       strlen(arch));
  int cc, suffix, features, enabled;
  char base[16];
  /* Well formed is all that is asked of an NVIDIA name here; which ones are
   * real targets is the loaded NVRTC's answer (ckjit__arch_check_nvrtc). */
  if (!parse_cuda(arch, &cc, &suffix)) return CKJIT_SUCCESS;
  if (!parse_hip(arch, base, sizeof base, &features, &enabled)) {
    /* hipRTC has no query for its targets (none up to ROCm 6.x): the table
     * above stands in for one. */
    int version = major * 100 + minor;
    for (size_t i = 0; i < sizeof hip_archs / sizeof *hip_archs; i++) {
      if (strcmp(hip_archs[i].name, base)) continue;
      int missing = features & ~hip_archs[i].features;
      if (missing)
        return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "arch '%s': %s has no %s feature", arch, base,
                           missing & XNACK ? "xnack" : "sramecc");
      if (major > 0 && version < hip_archs[i].since)
        return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                           "arch '%s': HIP %d.%d's hipRTC cannot compile for %s (needs HIP %d.%d "
                           "or newer); refusing before the compiler aborts the process",
                           arch, major, minor, base, hip_archs[i].since / 100,
                           hip_archs[i].since % 100);
      return CKJIT_SUCCESS;
    }
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "arch '%s': unknown AMD processor '%s'", arch, base);
  }
  if (!strncmp(arch, "sm_", 3))
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                       "arch '%s': not an NVIDIA arch name (sm_ and a compute capability of 2 or "
                       "3 digits, optionally followed by 'a' or 'f': sm_90, sm_90a, sm_100f)",
                       arch);
  return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                     "arch '%s': not an arch name (expected e.g. sm_90, sm_90a, gfx90a or "
                     "gfx90a:sramecc+:xnack-)",
                     arch);
}

/* "sm_75, sm_80, ..." into out. */
static void format_ccs(const int *ccs, int n, char *out, size_t len) {
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < n && used + 1 < len; i++) {
    int w = snprintf(out + used, len - used, "%ssm_%d", i ? ", " : "", ccs[i]);
    if (w < 0) break;
    used += (size_t)w;
  }
}

ckjit_status ckjit__arch_check_nvrtc(const char *arch, const int *ccs, int n_ccs, int major,
                                     int minor) {
  int cc, suffix;
  if (!arch || strlen(arch) >= CKJIT_ARCH_MAX || parse_cuda(arch, &cc, &suffix))
    return ckjit__arch_validate(arch, major, minor);
  int version = major * 100 + minor;
  int listed = n_ccs <= 0; /* an NVRTC without the query (before 11.2): its compile decides */
  for (int i = 0; i < n_ccs; i++) listed |= ccs[i] == cc;
  /* The suffixes follow NVIDIA's naming rules, confirmed on NVRTC 13.0 by
   * trial compiles (tests/unit/test_arch.c redoes them with the NVRTC present):
   * 'a' (arch-specific features, NVRTC 12.0+) on every listed sm_90 and
   * newer, 'f' (family, NVRTC 12.9+) on every listed sm_100 and newer. */
  const char *why = NULL;
  if (!listed) why = "not a target of this NVRTC";
  else if (suffix == 'a' && cc < 90) why = "the 'a' suffix exists for sm_90 and newer only";
  else if (suffix == 'f' && cc < 100) why = "the 'f' suffix exists for sm_100 and newer only";
  else if (suffix == 'a' && major > 0 && version < 1200) why = "the 'a' suffix needs NVRTC 12.0+";
  else if (suffix == 'f' && major > 0 && version < 1209) why = "the 'f' suffix needs NVRTC 12.9+";
  if (!why) return CKJIT_SUCCESS;
  char list[CKJIT_ARCH_LIST_MAX] = "an unreported set (no nvrtcGetSupportedArchs before 11.2)";
  if (n_ccs > 0) format_ccs(ccs, n_ccs, list, sizeof list);
  return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                     "arch '%s': %s; NVRTC %d.%d compiles for %s, with an 'a' suffix from sm_90 "
                     "and an 'f' suffix from sm_100 on (NVRTC 12.9+)",
                     arch, why, major, minor, list);
}

int ckjit__arch_cuda_cc(const char *arch) {
  int cc, suffix;
  return arch && !parse_cuda(arch, &cc, &suffix) ? cc : -1;
}

void ckjit__arch_base(const char *arch, char *out, size_t len) {
  if (!len) return;
  size_t n = 0;
  if (!strncmp(arch, "sm_", 3)) {
    n = 3;
    while (arch[n] >= '0' && arch[n] <= '9') n++;
  } else {
    while (arch[n] && arch[n] != ':') n++;
  }
  if (n >= len) n = len - 1;
  memcpy(out, arch, n);
  out[n] = '\0';
}

/* A feature a kernel requires ("xnack+") must not be contradicted by the device. */
static int features_compatible(const char *kernel_arch, const char *device_arch) {
  static const char *features[] = {"sramecc", "xnack"};
  for (int i = 0; i < 2; i++) {
    const char *k = strstr(kernel_arch, features[i]);
    const char *d = strstr(device_arch, features[i]);
    if (k && d && k[strlen(features[i])] != d[strlen(features[i])]) return 0;
  }
  return 1;
}

int ckjit__arch_compatible(const char *kernel_arch, const char *device_arch) {
  if (!kernel_arch || !device_arch) return 0;
  ckjit_backend kv = ckjit__arch_vendor(kernel_arch), dv = ckjit__arch_vendor(device_arch);
  if (kv == CKJIT_BACKEND_AUTO || kv != dv) return 0;
  char kb[CKJIT_ARCH_MAX], db[CKJIT_ARCH_MAX];
  ckjit__arch_base(kernel_arch, kb, sizeof kb);
  ckjit__arch_base(device_arch, db, sizeof db);
  if (strcmp(kb, db)) return 0;
  if (kv == CKJIT_BACKEND_CUDA) {
    /* sm_90a code runs only on a 9.0 device; "a" on the device side means nothing more. */
    return 1;
  }
  return features_compatible(kernel_arch, device_arch);
}

int ckjit__arch_has_mma_sync(const char *arch) { return ckjit__arch_cuda_cc(arch) >= 80; }
int ckjit__arch_has_wgmma(const char *arch) { return ckjit__arch_cuda_cc(arch) == 90; }
int ckjit__arch_has_mfma(const char *arch) {
  static const char *const with_mfma[] = {"gfx908", "gfx90a", "gfx940", "gfx941", "gfx942"};
  char base[16];
  ckjit__arch_base(arch, base, sizeof base);
  for (size_t i = 0; i < sizeof with_mfma / sizeof with_mfma[0]; i++)
    if (!strcmp(base, with_mfma[i])) return 1;
  return 0;
}
