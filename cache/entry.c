#include "entry.h"

#include "byte_order.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>


int ckjit__entry_encode(const ckjit_entry_meta *meta, const void *payload, size_t payload_size,
                        uint8_t **out, size_t *out_size) {
  size_t arch_len = strnlen(meta->arch, sizeof meta->arch);
  size_t name_len = strnlen(meta->kernel, sizeof meta->kernel);
  size_t spec_len = strnlen(meta->spec, sizeof meta->spec);
  if (arch_len >= sizeof meta->arch || name_len >= sizeof meta->kernel ||
      spec_len >= sizeof meta->spec ||
      payload_size > CKJIT_ENTRY_MAX_PAYLOAD)
    return -1;
  size_t header = CKJIT_ENTRY_FIXED_SIZE + arch_len + name_len + spec_len + 8;
  uint8_t *buf = malloc(header + payload_size);
  if (!buf) return -1;
  memcpy(buf, CKJIT_ENTRY_MAGIC, 8);
  ckjit__put_u32(buf + 8, CKJIT_CACHE_FORMAT_VERSION);
  ckjit__put_u32(buf + 12, (uint32_t)header);
  memcpy(buf + 16, meta->key.bytes, 16);
  ckjit__put_u64(buf + 32, payload_size);
  ckjit__put_u64(buf + 40, XXH3_64bits(payload, payload_size));
  ckjit__put_u16(buf + 48, (uint16_t)arch_len);
  ckjit__put_u16(buf + 50, (uint16_t)name_len);
  ckjit__put_u16(buf + 52, (uint16_t)spec_len);
  ckjit__put_u16(buf + 54, 0);
  memcpy(buf + CKJIT_ENTRY_FIXED_SIZE, meta->arch, arch_len);
  memcpy(buf + CKJIT_ENTRY_FIXED_SIZE + arch_len, meta->kernel, name_len);
  memcpy(buf + CKJIT_ENTRY_FIXED_SIZE + arch_len + name_len, meta->spec, spec_len);
  ckjit__put_u64(buf + header - 8, XXH3_64bits(buf, header - 8));
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
  if (ckjit__get_u32(buf + 8) != CKJIT_CACHE_FORMAT_VERSION) { reason = "other format version"; goto bad; }
  uint32_t header = ckjit__get_u32(buf + 12);
  uint16_t arch_len = ckjit__get_u16(buf + 48), name_len = ckjit__get_u16(buf + 50);
  uint16_t spec_len = ckjit__get_u16(buf + 52);
  if (arch_len >= sizeof meta->arch || name_len >= sizeof meta->kernel ||
      spec_len >= sizeof meta->spec ||
      header != CKJIT_ENTRY_FIXED_SIZE + (uint32_t)arch_len + name_len + spec_len + 8 ||
      ckjit__get_u16(buf + 54)) {
    reason = "malformed header";
    goto bad;
  }
  if (header > size) { reason = "file too short"; goto bad; }
  if (XXH3_64bits(buf, header - 8) != ckjit__get_u64(buf + header - 8)) {
    reason = "header checksum mismatch";
    goto bad;
  }
  /* Names are text: a NUL inside one would decode to a shorter name that
   * re-encodes to other bytes (entries must be canonical). */
  if (memchr(buf + CKJIT_ENTRY_FIXED_SIZE, 0, (size_t)arch_len + name_len + spec_len)) {
    reason = "malformed header";
    goto bad;
  }
  uint64_t psize = ckjit__get_u64(buf + 32);
  if (psize > CKJIT_ENTRY_MAX_PAYLOAD || psize != size - header) {
    reason = psize < size - header ? "trailing bytes" : "file too short";
    goto bad;
  }
  if (XXH3_64bits(buf + header, (size_t)psize) != ckjit__get_u64(buf + 40)) {
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
  memcpy(m.spec, buf + CKJIT_ENTRY_FIXED_SIZE + arch_len + name_len, spec_len);
  m.spec[spec_len] = '\0';
  if (meta) *meta = m;
  if (payload) *payload = buf + header;
  if (payload_size) *payload_size = (size_t)psize;
  return 0;
bad:
  if (why) *why = reason;
  return -1;
}
