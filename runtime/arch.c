/* Arch names are checked against tables before they reach a compiler:
 * Debian's hipRTC 5.2 aborts the whole process on targets it does not know
 * (gfx940, gfx942, gfx1100), so "let the compiler decide" is not safe. */
#include "arch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* NVIDIA compute capabilities (x10) NVRTC knows; NVRTC 13 dropped < 75. */
static const int cuda_archs[] = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89,
                                 90, 100, 101, 103, 110, 120, 121};

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

/* "gfxNNN[:feature(+|-)]*" with features sramecc and xnack, each at most once. */
static int parse_hip(const char *arch, char *base, size_t len, int *features) {
  if (strncmp(arch, "gfx", 3)) return -1;
  const char *p = arch + 3;
  size_t n = 0;
  while ((p[n] >= '0' && p[n] <= '9') || (p[n] >= 'a' && p[n] <= 'f')) n++;
  if (n < 3 || n > 4 || 3 + n >= len) return -1;
  memcpy(base, arch, 3 + n);
  base[3 + n] = '\0';
  p += n;
  *features = 0;
  while (*p == ':') {
    p++;
    int f;
    if (!strncmp(p, "sramecc", 7)) f = SRAMECC, p += 7;
    else if (!strncmp(p, "xnack", 5)) f = XNACK, p += 5;
    else return -1;
    if ((*features & f) || (*p != '+' && *p != '-')) return -1;
    *features |= f;
    p++;
  }
  return *p ? -1 : 0;
}

ckjit_backend ckjit__arch_vendor(const char *arch) {
  char base[16];
  int cc, suffix, features;
  if (!arch || strlen(arch) >= CKJIT_ARCH_MAX) return CKJIT_BACKEND_AUTO;
  if (!parse_cuda(arch, &cc, &suffix)) return CKJIT_BACKEND_CUDA;
  if (!parse_hip(arch, base, sizeof base, &features)) return CKJIT_BACKEND_HIP;
  return CKJIT_BACKEND_AUTO;
}

ckjit_status ckjit__arch_validate(const char *arch, int major, int minor) {
  if (!arch || !*arch) return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "arch: empty arch name");
  if (strlen(arch) >= CKJIT_ARCH_MAX)
    return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "arch: name too long (%zu characters)",
                       strlen(arch));
  int cc, suffix, features;
  char base[16];
  if (!parse_cuda(arch, &cc, &suffix)) {
    int known = 0;
    for (size_t i = 0; i < sizeof cuda_archs / sizeof *cuda_archs; i++) known |= cuda_archs[i] == cc;
    if (!known)
      return ckjit__fail(CKJIT_ERROR_UNSUPPORTED, "arch '%s': unknown NVIDIA compute capability",
                         arch);
    if (major >= 13 && cc < 75)
      return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                         "arch '%s': NVRTC %d.%d supports sm_75 and newer only", arch, major, minor);
    if (suffix && cc < 90)
      return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                         "arch '%s': the '%c' suffix exists for sm_90 and newer only", arch, suffix);
    return CKJIT_SUCCESS;
  }
  if (!parse_hip(arch, base, sizeof base, &features)) {
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
  return ckjit__fail(CKJIT_ERROR_UNSUPPORTED,
                     "arch '%s': not an arch name (expected e.g. sm_90, sm_90a, gfx90a or "
                     "gfx90a:sramecc+:xnack-)",
                     arch);
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
