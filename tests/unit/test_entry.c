/* ckjit__entry_encode / ckjit__entry_decode: the verified on-disk format. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache/entry.h"
#include "cache/key.h"
#include "entry_format.h"
#include "test_util.h"

#define PAYLOAD_SIZE 1000

typedef struct fixture {
  ckjit_entry_meta meta;
  uint8_t payload[PAYLOAD_SIZE];
  uint8_t *buf;
  size_t size;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f) return -1;
  for (int i = 0; i < 16; i++) f->meta.key.bytes[i] = (uint8_t)(0xC0 + i * 3);
  strcpy(f->meta.arch, "gfx90a:sramecc+:xnack-");
  strcpy(f->meta.kernel, "ckjit_elementwise_kernel");
  strcpy(f->meta.spec, "elementwise:dtype=f32,op=relu,epilogue=none,vec=4,threads=256,unroll=1");
  tu_rng r = {42};
  for (int i = 0; i < PAYLOAD_SIZE; i++) f->payload[i] = (uint8_t)tu_rng_next(&r);
  if (ckjit__entry_encode(&f->meta, f->payload, PAYLOAD_SIZE, &f->buf, &f->size) != 0) {
    free(f);
    return -1;
  }
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  free(f->buf);
  free(f);
  return 0;
}

/* Decodes and expects failure with a reason. */
static void expect_reject(const uint8_t *buf, size_t size, const ckjit_key *expect, const char *what) {
  ckjit_entry_meta meta;
  const uint8_t *payload = NULL;
  size_t psize = 0;
  const char *why = NULL;
  int rc = ckjit__entry_decode(buf, size, expect, &meta, &payload, &psize, &why);
  if (rc != -1) {
    print_error("decode accepted a bad entry (%s), rc=%d\n", what, rc);
    fail();
  }
  if (!why || !*why) {
    print_error("decode rejected (%s) without a reason\n", what);
    fail();
  }
}

static void expect_accept(const fixture *f, const uint8_t *buf, size_t size) {
  ckjit_entry_meta meta;
  memset(&meta, 0x7F, sizeof meta);
  const uint8_t *payload = NULL;
  size_t psize = 0;
  const char *why = NULL;
  int rc = ckjit__entry_decode(buf, size, &f->meta.key, &meta, &payload, &psize, &why);
  if (rc != 0) print_error("decode failed: %s\n", why ? why : "(no reason)");
  assert_int_equal(rc, 0);
  assert_true(ckjit__key_equal(&meta.key, &f->meta.key));
  assert_string_equal(meta.arch, f->meta.arch);
  assert_string_equal(meta.kernel, f->meta.kernel);
  assert_string_equal(meta.spec, f->meta.spec);
  assert_int_equal(psize, PAYLOAD_SIZE);
  assert_non_null(payload);
  /* The payload points into the buffer. */
  assert_true(payload >= buf && payload + psize <= buf + size);
  assert_memory_equal(payload, f->payload, PAYLOAD_SIZE);
}

static void test_round_trip(void **state) {
  fixture *f = *state;
  expect_accept(f, f->buf, f->size);
  /* With no expected key as well. */
  ckjit_entry_meta meta;
  const uint8_t *payload;
  size_t psize;
  const char *why = NULL;
  assert_int_equal(ckjit__entry_decode(f->buf, f->size, NULL, &meta, &payload, &psize, &why), 0);
  assert_int_equal(psize, PAYLOAD_SIZE);
  /* Encoding is deterministic. */
  uint8_t *again = NULL;
  size_t again_size = 0;
  assert_int_equal(ckjit__entry_encode(&f->meta, f->payload, PAYLOAD_SIZE, &again, &again_size), 0);
  assert_int_equal(again_size, f->size);
  assert_memory_equal(again, f->buf, f->size);
  free(again);
}

static void test_documented_layout(void **state) {
  fixture *f = *state;
  size_t arch_len = strlen(f->meta.arch), kernel_len = strlen(f->meta.kernel);
  size_t spec_len = strlen(f->meta.spec);
  size_t header = CKJIT_ENTRY_FIXED_SIZE + arch_len + kernel_len + spec_len + 8;
  assert_int_equal(f->size, header + PAYLOAD_SIZE);
  assert_memory_equal(f->buf, CKJIT_ENTRY_MAGIC, 8);
  assert_int_equal(ef_get32(f->buf + EF_OFF_VERSION), CKJIT_CACHE_FORMAT_VERSION);
  assert_int_equal(ef_get32(f->buf + EF_OFF_HEADER_SIZE), header);
  assert_memory_equal(f->buf + EF_OFF_KEY, f->meta.key.bytes, 16);
  assert_int_equal(ef_get64(f->buf + EF_OFF_PAYLOAD_SIZE), PAYLOAD_SIZE);
  assert_int_equal(ef_get64(f->buf + EF_OFF_PAYLOAD_SUM), XXH3_64bits(f->payload, PAYLOAD_SIZE));
  assert_int_equal(f->buf[EF_OFF_ARCH_LEN] | f->buf[EF_OFF_ARCH_LEN + 1] << 8, arch_len);
  assert_int_equal(f->buf[EF_OFF_KERNEL_LEN] | f->buf[EF_OFF_KERNEL_LEN + 1] << 8, kernel_len);
  assert_int_equal(f->buf[EF_OFF_SPEC_LEN] | f->buf[EF_OFF_SPEC_LEN + 1] << 8, spec_len);
  assert_int_equal(f->buf[EF_OFF_RESERVED] | f->buf[EF_OFF_RESERVED + 1] << 8, 0);
  assert_memory_equal(f->buf + CKJIT_ENTRY_FIXED_SIZE, f->meta.arch, arch_len);
  assert_memory_equal(f->buf + CKJIT_ENTRY_FIXED_SIZE + arch_len, f->meta.kernel, kernel_len);
  assert_memory_equal(f->buf + CKJIT_ENTRY_FIXED_SIZE + arch_len + kernel_len, f->meta.spec,
                      spec_len);
  assert_int_equal(ef_get64(f->buf + header - 8), XXH3_64bits(f->buf, header - 8));
  assert_memory_equal(f->buf + header, f->payload, PAYLOAD_SIZE);

  /* Resealing an unmodified entry changes nothing (so the forged entries
   * below differ from valid ones only in the field they edit). */
  uint8_t *copy = malloc(f->size);
  assert_non_null(copy);
  memcpy(copy, f->buf, f->size);
  ef_reseal(copy, f->size);
  assert_memory_equal(copy, f->buf, f->size);
  free(copy);
}

static void test_truncated_every_length(void **state) {
  fixture *f = *state;
  /* A heap copy of exactly `len` bytes, so reading past it is caught by
   * sanitizers/valgrind. */
  for (size_t len = 0; len < f->size; len++) {
    uint8_t *t = malloc(len ? len : 1);
    assert_non_null(t);
    memcpy(t, f->buf, len);
    char what[64];
    snprintf(what, sizeof what, "truncated to %zu bytes", len);
    expect_reject(t, len, NULL, what);
    expect_reject(t, len, &f->meta.key, what);
    free(t);
  }
}

static void test_trailing_bytes(void **state) {
  fixture *f = *state;
  uint8_t *t = malloc(f->size + 1);
  assert_non_null(t);
  memcpy(t, f->buf, f->size);
  t[f->size] = 0;
  expect_reject(t, f->size + 1, NULL, "one trailing byte");
  free(t);
}

static void test_every_byte_flip(void **state) {
  fixture *f = *state;
  uint8_t *t = malloc(f->size);
  assert_non_null(t);
  static const uint8_t masks[] = {0x01, 0x80, 0xFF};
  for (size_t i = 0; i < f->size; i++) {
    for (size_t m = 0; m < sizeof masks; m++) {
      memcpy(t, f->buf, f->size);
      t[i] ^= masks[m];
      char what[64];
      snprintf(what, sizeof what, "byte %zu ^= 0x%02x", i, masks[m]);
      expect_reject(t, f->size, NULL, what);
    }
  }
  free(t);
}

static void test_wrong_magic(void **state) {
  fixture *f = *state;
  uint8_t *t = malloc(f->size);
  assert_non_null(t);
  for (int i = 0; i < 8; i++) {
    memcpy(t, f->buf, f->size);
    t[i] = (uint8_t)(t[i] == 'X' ? 'Y' : 'X');
    ef_reseal(t, f->size);
    expect_reject(t, f->size, NULL, "wrong magic (resealed)");
  }
  free(t);
}

static void test_wrong_version(void **state) {
  fixture *f = *state;
  uint8_t *t = malloc(f->size);
  assert_non_null(t);
  const uint32_t versions[] = {0, CKJIT_CACHE_FORMAT_VERSION + 1, 0x01000000u | CKJIT_CACHE_FORMAT_VERSION,
                               0xFFFFFFFFu};
  for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) {
    memcpy(t, f->buf, f->size);
    ef_put32(t + EF_OFF_VERSION, versions[v]);
    ef_reseal(t, f->size);
    expect_reject(t, f->size, NULL, "wrong format version (resealed)");
  }
  free(t);
}

static void test_forged_fields(void **state) {
  fixture *f = *state;
  size_t h = ef_get32(f->buf + EF_OFF_HEADER_SIZE);
  uint8_t *t = malloc(f->size);
  assert_non_null(t);

  /* Reserved bytes must be zero. */
  memcpy(t, f->buf, f->size);
  t[EF_OFF_RESERVED + 1] = 1;
  ef_reseal(t, f->size);
  expect_reject(t, f->size, NULL, "reserved != 0 (resealed)");

  /* Payload size that disagrees with the buffer, checksums right. */
  const uint64_t sizes[] = {0, PAYLOAD_SIZE - 1, PAYLOAD_SIZE + 1, CKJIT_ENTRY_MAX_PAYLOAD + 1ull,
                            UINT64_MAX, UINT64_MAX - h + 1};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    memcpy(t, f->buf, f->size);
    ef_put64(t + EF_OFF_PAYLOAD_SIZE, sizes[i]);
    ef_reseal_at(t, h, PAYLOAD_SIZE);
    expect_reject(t, f->size, NULL, "payload size lies (resealed)");
  }

  /* Header size that disagrees with the lengths. */
  const uint32_t hsizes[] = {0, 8, CKJIT_ENTRY_FIXED_SIZE, (uint32_t)h - 1, (uint32_t)h + 1, 0xFFFFFFFFu};
  for (size_t i = 0; i < sizeof hsizes / sizeof hsizes[0]; i++) {
    memcpy(t, f->buf, f->size);
    ef_put32(t + EF_OFF_HEADER_SIZE, hsizes[i]);
    ef_reseal_at(t, h, PAYLOAD_SIZE);
    expect_reject(t, f->size, NULL, "header size lies (resealed at the real place)");
  }

  /* Arch/kernel lengths that overrun, checksums placed where the real
   * header ends. */
  const uint16_t lens[] = {0, 0xFFFF, 1000};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    memcpy(t, f->buf, f->size);
    t[EF_OFF_ARCH_LEN] = (uint8_t)lens[i];
    t[EF_OFF_ARCH_LEN + 1] = (uint8_t)(lens[i] >> 8);
    ef_reseal_at(t, h, PAYLOAD_SIZE);
    expect_reject(t, f->size, NULL, "arch length lies (resealed)");
    memcpy(t, f->buf, f->size);
    t[EF_OFF_KERNEL_LEN] = (uint8_t)lens[i];
    t[EF_OFF_KERNEL_LEN + 1] = (uint8_t)(lens[i] >> 8);
    ef_reseal_at(t, h, PAYLOAD_SIZE);
    expect_reject(t, f->size, NULL, "kernel length lies (resealed)");
  }
  free(t);
}

static void test_wrong_expected_key(void **state) {
  fixture *f = *state;
  for (int i = 0; i < 16; i++) {
    ckjit_key other = f->meta.key;
    other.bytes[i] ^= 0x10;
    expect_reject(f->buf, f->size, &other, "another key expected");
  }
  /* The stored key edited and resealed: fine without an expectation (it is
   * a valid entry of another key), rejected when the real key is expected. */
  uint8_t *t = malloc(f->size);
  assert_non_null(t);
  memcpy(t, f->buf, f->size);
  t[EF_OFF_KEY + 5] ^= 0x42;
  ef_reseal(t, f->size);
  expect_reject(t, f->size, &f->meta.key, "stored key differs (resealed)");
  ckjit_entry_meta meta;
  const uint8_t *payload;
  size_t psize;
  const char *why = NULL;
  assert_int_equal(ckjit__entry_decode(t, f->size, NULL, &meta, &payload, &psize, &why), 0);
  assert_int_equal(meta.key.bytes[5], f->meta.key.bytes[5] ^ 0x42);
  free(t);
}

static void test_zero_length(void **state) {
  fixture *f = *state;
  uint8_t one = 0;
  expect_reject(&one, 0, NULL, "zero-length buffer");
  expect_reject(&one, 0, &f->meta.key, "zero-length buffer");
  expect_reject(f->buf, 0, NULL, "zero-length view of a valid entry");
  uint8_t zeros[256];
  memset(zeros, 0, sizeof zeros);
  expect_reject(zeros, sizeof zeros, NULL, "all zeros");
  memcpy(zeros, CKJIT_ENTRY_MAGIC, 8);
  expect_reject(zeros, sizeof zeros, NULL, "magic then zeros");
}

static void test_various_sizes(void **state) {
  (void)state;
  /* Round trip of other payload sizes and name lengths, incl. the longest
   * names a meta can hold (63 chars). */
  const size_t sizes[] = {1, 7, 8, 4096, 65537};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    ckjit_entry_meta m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < 16; i++) m.key.bytes[i] = (uint8_t)(s * 31 + i);
    memset(m.arch, 'a', s % 2 ? 63 : 5);
    memset(m.kernel, 'k', s % 2 ? 5 : 63);
    uint8_t *payload = malloc(sizes[s]);
    assert_non_null(payload);
    tu_rng r = {s + 1};
    for (size_t i = 0; i < sizes[s]; i++) payload[i] = (uint8_t)tu_rng_next(&r);
    uint8_t *buf = NULL;
    size_t n = 0;
    assert_int_equal(ckjit__entry_encode(&m, payload, sizes[s], &buf, &n), 0);
    ckjit_entry_meta out;
    const uint8_t *p;
    size_t pn;
    const char *why = NULL;
    assert_int_equal(ckjit__entry_decode(buf, n, &m.key, &out, &p, &pn, &why), 0);
    assert_int_equal(pn, sizes[s]);
    assert_memory_equal(p, payload, pn);
    assert_string_equal(out.arch, m.arch);
    assert_string_equal(out.kernel, m.kernel);
    free(buf);
    free(payload);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_documented_layout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_truncated_every_length, setup, teardown),
      cmocka_unit_test_setup_teardown(test_trailing_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_every_byte_flip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wrong_magic, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wrong_version, setup, teardown),
      cmocka_unit_test_setup_teardown(test_forged_fields, setup, teardown),
      cmocka_unit_test_setup_teardown(test_wrong_expected_key, setup, teardown),
      cmocka_unit_test_setup_teardown(test_zero_length, setup, teardown),
      cmocka_unit_test(test_various_sizes),
  };
  return cmocka_run_group_tests_name("entry", tests, NULL, NULL);
}
