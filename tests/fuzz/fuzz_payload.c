/* libFuzzer target: the cache's payload check, ckjit__entry_accept_payload
 * (cache/payload_check.c), which reads every entry's code object with libelf
 * on its first load from disk, on arbitrary bytes.
 *
 * The first byte picks the entry's arch and kernel name (NVIDIA, AMD with a
 * known processor, AMD with features, an unknown AMD processor); the rest is
 * the payload.  Besides memory safety (ASan/UBSan), it checks what the check
 * promises: a refusal comes with a reason, and an accepted payload is a
 * 64-bit little-endian ELF object (or an offload bundle, for AMD). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/payload_check.h"

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "fuzz_payload: check failed: %s (line %d)\n", #cond, __LINE__); \
      abort();                                                                       \
    }                                                                                \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const archs[] = {"sm_90", "gfx90a", "gfx90a:sramecc+:xnack-", "gfx1250"};
  static const char *const kernels[] = {"ckjit_transpose", "k", ""};
  ckjit_entry_meta meta;
  memset(&meta, 0, sizeof meta);
  uint8_t pick = size ? data[0] : 0;
  snprintf(meta.arch, sizeof meta.arch, "%s", archs[pick % 4]);
  snprintf(meta.kernel, sizeof meta.kernel, "%s", kernels[(pick / 4) % 3]);
  size_t n = size ? size - 1 : 0;
  /* An exact-size copy, so that reading one byte past the end is caught. */
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf) return 0;
  if (n) memcpy(buf, data + 1, n);
  const char *why = NULL;
  int rc = ckjit__entry_accept_payload(&meta, buf, n, &why);
  if (rc != 0) {
    CHECK(rc == -1);
    CHECK(why != NULL && strlen(why) > 0);
  } else {
    CHECK(n >= 4);
    CHECK(!memcmp(buf, "\177ELF", 4) || !memcmp(buf, "__CLANG_OFFLOAD_BUNDLE__", n < 24 ? n : 24));
  }
  free(buf);
  return 0;
}
