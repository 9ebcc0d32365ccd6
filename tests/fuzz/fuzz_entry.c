/* libFuzzer target: the cache-entry reader, ckjit__entry_decode
 * (cache/entry.c), on arbitrary bytes.
 *
 * Besides memory safety (ASan/UBSan), it checks what a successful decode
 * promises: the payload lies inside the buffer and ends with it, the names
 * are NUL-terminated within their fields, decoding with the stored key as the
 * expected one succeeds and with any other key fails, and encoding the
 * decoded entry again gives back exactly the input (one valid byte string per
 * entry: nothing in a file is left unchecked). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/entry.h"
#include "cache/key.h"

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "fuzz_entry: check failed: %s (line %d)\n", #cond, __LINE__); \
      abort();                                                               \
    }                                                                        \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* An exact-size copy, so that reading one byte past the end is caught. */
  uint8_t *buf = malloc(size ? size : 1);
  if (!buf) return 0;
  if (size) memcpy(buf, data, size);

  ckjit_entry_meta meta;
  const uint8_t *payload = NULL;
  size_t psize = 0;
  const char *why = NULL;
  int rc = ckjit__entry_decode(buf, size, NULL, &meta, &payload, &psize, &why);
  if (rc != 0) {
    CHECK(rc == -1);
    CHECK(why != NULL && strlen(why) > 0);
    free(buf);
    return 0;
  }
  CHECK(payload >= buf && payload <= buf + size);
  CHECK(psize == (size_t)(buf + size - payload));
  CHECK(memchr(meta.arch, 0, sizeof meta.arch) != NULL);
  CHECK(memchr(meta.kernel, 0, sizeof meta.kernel) != NULL);

  /* The stored key is the only one that matches. */
  ckjit_key key = meta.key, other = meta.key;
  CHECK(ckjit__entry_decode(buf, size, &key, NULL, NULL, NULL, NULL) == 0);
  other.bytes[size % 16] ^= 1;
  why = NULL;
  CHECK(ckjit__entry_decode(buf, size, &other, NULL, NULL, NULL, &why) == -1);
  CHECK(why != NULL);

  /* Canonical: re-encoding gives the same bytes. */
  uint8_t *again = NULL;
  size_t again_size = 0;
  CHECK(ckjit__entry_encode(&meta, payload, psize, &again, &again_size) == 0);
  if (again_size != size || memcmp(again, buf, size) != 0) {
    fprintf(stderr,
            "fuzz_entry: a decodable entry does not re-encode to itself (%zu -> %zu bytes; "
            "arch '%s', kernel '%s')\n",
            size, again_size, meta.arch, meta.kernel);
    abort();
  }
  free(again);
  free(buf);
  return 0;
}
