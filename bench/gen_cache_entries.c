/* Fills a cache directory with N valid entries (random keys, payloads of
 * 8-20 KB, the realistic size of a compiled kernel: a minimal ELF object
 * for the entry's arch defining its kernel, which the cache's payload check
 * accepts, padded with random bytes), laid out as
 * the library lays them out: DIR/xx/<32 hex key>.ckjit, encoded with the
 * library's own encoder.  Used by bench/bench_verify.sh.
 *
 *   gen_cache_entries DIR N [SEED]
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache/entry.h"
#include "cache/key.h"
#include "tests/common/elf_payload.h"

static uint64_t rng(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: gen_cache_entries DIR N [SEED]\n");
    return 2;
  }
  const char *dir = argv[1];
  long n = strtol(argv[2], NULL, 10);
  uint64_t s = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
  if (mkdir(dir, 0700) && errno != EEXIST) {
    perror(dir);
    return 1;
  }
  static uint8_t payload[20 * 1024];
  uint64_t total = 0;
  for (long i = 0; i < n; i++) {
    ckjit_entry_meta m;
    memset(&m, 0, sizeof m);
    for (int k = 0; k < 16; k += 8) {
      uint64_t v = rng(&s);
      memcpy(m.key.bytes + k, &v, 8);
    }
    snprintf(m.arch, sizeof m.arch, "%s", i % 2 ? "sm_90" : "gfx90a");
    snprintf(m.kernel, sizeof m.kernel, "%s", i % 3 ? "ckjit_elementwise" : "ckjit_transpose");
    size_t size = 8 * 1024 + (size_t)(rng(&s) % (12 * 1024 + 1));
    size = ep_build(payload, size, m.arch, m.kernel, rng(&s));
    uint8_t *buf;
    size_t buf_size;
    if (ckjit__entry_encode(&m, payload, size, &buf, &buf_size)) return 1;
    char hex[33], path[4096];
    ckjit__key_hex(&m.key, hex);
    snprintf(path, sizeof path, "%s/%.2s", dir, hex);
    if (mkdir(path, 0700) && errno != EEXIST) {
      perror(path);
      return 1;
    }
    snprintf(path, sizeof path, "%s/%.2s/%s.ckjit", dir, hex, hex);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, buf_size, f) != buf_size || fclose(f)) {
      perror(path);
      return 1;
    }
    chmod(path, 0600);
    free(buf);
    total += buf_size;
  }
  printf("%ld entries, %llu bytes in %s\n", n, (unsigned long long)total, dir);
  return 0;
}
