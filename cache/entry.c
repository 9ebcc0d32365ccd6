#include "entry.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static void put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put_u32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put_u64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

int ckjit__entry_encode(const ckjit_entry_meta *meta, const void *payload, size_t payload_size,
                        uint8_t **out, size_t *out_size) {
  size_t arch_len = strnlen(meta->arch, sizeof meta->arch);
  size_t name_len = strnlen(meta->kernel, sizeof meta->kernel);
  if (arch_len >= sizeof meta->arch || name_len >= sizeof meta->kernel ||
      payload_size > CKJIT_ENTRY_MAX_PAYLOAD)
    return -1;
  size_t header = CKJIT_ENTRY_FIXED_SIZE + arch_len + name_len + 8;
  uint8_t *buf = malloc(header + payload_size);
  if (!buf) return -1;
  memcpy(buf, CKJIT_ENTRY_MAGIC, 8);
  put_u32(buf + 8, CKJIT_CACHE_FORMAT_VERSION);
  put_u32(buf + 12, (uint32_t)header);
  memcpy(buf + 16, meta->key.bytes, 16);
  put_u64(buf + 32, payload_size);
  put_u64(buf + 40, XXH3_64bits(payload, payload_size));
  put_u16(buf + 48, (uint16_t)arch_len);
  put_u16(buf + 50, (uint16_t)name_len);
  put_u32(buf + 52, 0);
  memcpy(buf + CKJIT_ENTRY_FIXED_SIZE, meta->arch, arch_len);
  memcpy(buf + CKJIT_ENTRY_FIXED_SIZE + arch_len, meta->kernel, name_len);
  put_u64(buf + header - 8, XXH3_64bits(buf, header - 8));
  if (payload_size) memcpy(buf + header, payload, payload_size);
  *out = buf;
  *out_size = header + payload_size;
  return 0;
}

int ckjit__entry_decode(const uint8_t *buf, size_t size, const ckjit_key *expect,
                        ckjit_entry_meta *meta, const uint8_t **payload, size_t *payload_size,
                        const char **why) {
  const char *reason = NULL;
  if (!buf || size < CKJIT_ENTRY_FIXED_SIZE + 8) { reason = "file too short"; goto bad; }
  if (memcmp(buf, CKJIT_ENTRY_MAGIC, 8)) { reason = "bad magic"; goto bad; }
  if (get_u32(buf + 8) != CKJIT_CACHE_FORMAT_VERSION) { reason = "other format version"; goto bad; }
  uint32_t header = get_u32(buf + 12);
  uint16_t arch_len = get_u16(buf + 48), name_len = get_u16(buf + 50);
  if (arch_len >= sizeof meta->arch || name_len >= sizeof meta->kernel ||
      header != CKJIT_ENTRY_FIXED_SIZE + (uint32_t)arch_len + name_len + 8 || get_u32(buf + 52)) {
    reason = "malformed header";
    goto bad;
  }
  if (header > size) { reason = "file too short"; goto bad; }
  if (XXH3_64bits(buf, header - 8) != get_u64(buf + header - 8)) {
    reason = "header checksum mismatch";
    goto bad;
  }
  /* Names are text: a NUL inside one would decode to a shorter name that
   * re-encodes to other bytes (entries must be canonical). */
  if (memchr(buf + CKJIT_ENTRY_FIXED_SIZE, 0, (size_t)arch_len + name_len)) {
    reason = "malformed header";
    goto bad;
  }
  uint64_t psize = get_u64(buf + 32);
  if (psize > CKJIT_ENTRY_MAX_PAYLOAD || psize != size - header) {
    reason = psize < size - header ? "trailing bytes" : "file too short";
    goto bad;
  }
  if (XXH3_64bits(buf + header, (size_t)psize) != get_u64(buf + 40)) {
    reason = "payload checksum mismatch";
    goto bad;
  }
  ckjit_entry_meta m;
  memcpy(m.key.bytes, buf + 16, 16);
  if (expect && !ckjit__key_equal(&m.key, expect)) { reason = "entry holds another key"; goto bad; }
  memcpy(m.arch, buf + CKJIT_ENTRY_FIXED_SIZE, arch_len);
  m.arch[arch_len] = '\0';
  memcpy(m.kernel, buf + CKJIT_ENTRY_FIXED_SIZE + arch_len, name_len);
  m.kernel[name_len] = '\0';
  if (meta) *meta = m;
  if (payload) *payload = buf + header;
  if (payload_size) *payload_size = (size_t)psize;
  return 0;
bad:
  if (why) *why = reason;
  return -1;
}
