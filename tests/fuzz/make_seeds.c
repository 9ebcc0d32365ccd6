/* Writes the entry seeds of corpus/entry/: valid entries made with the
 * library's own encoder (ckjit__entry_encode).  Run by hand when the entry
 * format changes (from the repository root):
 *
 *   cc -Iinclude -I. tests/fuzz/make_seeds.c cache/entry.c cache/key.c -lxxhash \
 *      -o /tmp/make_seeds
 *   /tmp/make_seeds tests/fuzz/corpus/entry
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/entry.h"

static int write_seed(const char *dir, const char *name, const char *arch, const char *kernel,
                      const uint8_t *payload, size_t n, int key_seed) {
  ckjit_entry_meta m;
  memset(&m, 0, sizeof m);
  for (int i = 0; i < 16; i++) m.key.bytes[i] = (uint8_t)(key_seed * 31 + i * 17);
  snprintf(m.arch, sizeof m.arch, "%s", arch);
  snprintf(m.kernel, sizeof m.kernel, "%s", kernel);
  if (key_seed % 2) /* half the seeds name a spec, half leave it empty */
    snprintf(m.spec, sizeof m.spec, "elementwise:dtype=f32,op=relu,epilogue=none,vec=4,threads=256,unroll=1");
  uint8_t *buf;
  size_t size;
  if (ckjit__entry_encode(&m, payload, n, &buf, &size)) return -1;
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(buf, 1, size, f) != size || fclose(f)) return -1;
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  static uint8_t p[2048];
  uint64_t s = 0x1234;
  for (size_t i = 0; i < sizeof p; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = (uint8_t)(s >> 56);
  }
  memcpy(p, "\177ELF\002\001\001", 7);
  char long_arch[64], long_kernel[64];
  memset(long_arch, 'a', 63);
  long_arch[63] = 0;
  memset(long_kernel, 'k', 63);
  long_kernel[63] = 0;
  int rc = 0;
  rc |= write_seed(argv[1], "empty-payload", "sm_90", "ckjit_elementwise", p, 0, 1);
  rc |= write_seed(argv[1], "small-gfx", "gfx90a:sramecc+:xnack-", "ckjit_transpose", p + 7, 100, 2);
  rc |= write_seed(argv[1], "elf-sm90a", "sm_90a", "ckjit_elementwise", p, 1500, 3);
  rc |= write_seed(argv[1], "longest-names", long_arch, long_kernel, p, 64, 4);
  rc |= write_seed(argv[1], "empty-names", "", "", p, 1, 5);
  return rc ? 1 : 0;
}
