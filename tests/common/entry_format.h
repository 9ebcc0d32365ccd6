/* Test-side knowledge of the documented entry layout (cache/entry.h), used to
 * forge entries whose checksums are right but whose fields are wrong. */
#ifndef CKJIT_TESTS_ENTRY_FORMAT_H
#define CKJIT_TESTS_ENTRY_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

#if defined(__GNUC__)
#define EF_UNUSED __attribute__((unused))
#else
#define EF_UNUSED
#endif

static EF_UNUSED uint32_t ef_get32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static EF_UNUSED uint64_t ef_get64(const uint8_t *p) {
  return (uint64_t)ef_get32(p) | (uint64_t)ef_get32(p + 4) << 32;
}

static EF_UNUSED void ef_put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static EF_UNUSED void ef_put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

enum {
  EF_OFF_MAGIC = 0,
  EF_OFF_VERSION = 8,
  EF_OFF_HEADER_SIZE = 12,
  EF_OFF_KEY = 16,
  EF_OFF_PAYLOAD_SIZE = 32,
  EF_OFF_PAYLOAD_SUM = 40,
  EF_OFF_ARCH_LEN = 48,
  EF_OFF_KERNEL_LEN = 50,
  EF_OFF_SPEC_LEN = 52,
  EF_OFF_RESERVED = 54
};

/* Recomputes both checksums after a field was edited.  `header_size` is the
 * header size the checksum is placed by (normally the stored one); the
 * payload is everything after it, `payload_size` bytes of it. */
static EF_UNUSED void ef_reseal_at(uint8_t *buf, size_t header_size, size_t payload_size) {
  ef_put64(buf + EF_OFF_PAYLOAD_SUM, XXH3_64bits(buf + header_size, payload_size));
  ef_put64(buf + header_size - 8, XXH3_64bits(buf, header_size - 8));
}

/* Reseals a buffer of `size` bytes using its stored header size. */
static EF_UNUSED void ef_reseal(uint8_t *buf, size_t size) {
  size_t h = ef_get32(buf + EF_OFF_HEADER_SIZE);
  ef_reseal_at(buf, h, size - h);
}

#endif
