/* Which default specs have a kernel on every arch, for tests that compile
 * them for more than one arch (header-only, static).  The arch-specific
 * families (gemm_mma, gemm_wgmma, gemm_tf32, attention_decode,
 * attention_mma, attention_wgmma: NVIDIA; gemm_mfma, attention_mfma: AMD)
 * must be refused for the other vendor; this is the tests' own statement
 * of that list, not the library's. */
#ifndef CKJIT_TESTS_PORTABLE_SPECS_H
#define CKJIT_TESTS_PORTABLE_SPECS_H

#include <stddef.h>
#include <string.h>

#include "ckjit/ckjit.h"

enum { PS_PORTABLE, PS_NVIDIA_ONLY, PS_AMD_ONLY };

static __attribute__((unused)) int ps_vendor_only(const char *spec) {
  static const char *const nvidia[] = {"gemm_mma:", "gemm_wgmma:", "gemm_tf32:", "gemm_fp8:", "attention_decode:",
                                       "attention_mma:", "attention_wgmma:"};
  static const char *const amd[] = {"gemm_mfma:", "attention_mfma:"};
  for (size_t i = 0; i < sizeof nvidia / sizeof nvidia[0]; i++)
    if (!strncmp(spec, nvidia[i], strlen(nvidia[i]))) return PS_NVIDIA_ONLY;
  for (size_t i = 0; i < sizeof amd / sizeof amd[0]; i++)
    if (!strncmp(spec, amd[i], strlen(amd[i]))) return PS_AMD_ONLY;
  return PS_PORTABLE;
}

static __attribute__((unused)) int ps_portable(const char *spec) {
  return ps_vendor_only(spec) == PS_PORTABLE;
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
