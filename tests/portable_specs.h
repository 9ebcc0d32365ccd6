/* Default specs with a kernel on every arch, for tests that compile a
 * spread of them for more than one arch (header-only, static).  The
 * arch-specific GEMM families (gemm_mma, gemm_wgmma, gemm_tf32: NVIDIA;
 * gemm_mfma: AMD) are refused elsewhere, so they are left out. */
#ifndef CKJIT_TESTS_PORTABLE_SPECS_H
#define CKJIT_TESTS_PORTABLE_SPECS_H

#include <stddef.h>
#include <string.h>

#include "ckjit/ckjit.h"

static int ps_portable(const char *spec) {
  static const char *const arch_specific[] = {"gemm_mma:", "gemm_wgmma:", "gemm_tf32:", "gemm_mfma:"};
  for (size_t i = 0; i < sizeof arch_specific / sizeof arch_specific[0]; i++)
    if (!strncmp(spec, arch_specific[i], strlen(arch_specific[i]))) return 0;
  return 1;
}

/* The k-th of `count` portable default specs spread evenly from the first
 * to the last, into buf.
 * Returns 0, or -1 when there are fewer than `count`. */
static __attribute__((unused)) int ps_pick(size_t k, size_t count, char *buf, size_t len) {
  const size_t n = ckjit_default_spec_count();
  size_t portable = 0;
  char s[512];
  for (size_t i = 0; i < n; i++)
    if (ckjit_default_spec(i, s, sizeof s) == CKJIT_SUCCESS && ps_portable(s)) portable++;
  if (portable < count || count == 0) return -1;
  const size_t want = count > 1 ? k * (portable - 1) / (count - 1) : 0;
  for (size_t i = 0, seen = 0; i < n; i++) {
    if (ckjit_default_spec(i, s, sizeof s) != CKJIT_SUCCESS || !ps_portable(s)) continue;
    if (seen++ == want) {
      if (strlen(s) >= len) return -1;
      memcpy(buf, s, strlen(s) + 1);
      return 0;
    }
  }
  return -1;
}

#endif
