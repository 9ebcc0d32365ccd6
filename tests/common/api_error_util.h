/* Helpers shared by the argument-validation tests of the public API
 * (tests/api/: test_api_errors.c, test_rows_api_errors.c,
 * test_gemm_api_errors.c): fake device addresses, the group setup, and "run
 * one call on a fresh thread, then check its status, ckjit_last_status() and
 * message".  Header-only, static; include after <cmocka.h>. */
#ifndef CKJIT_TESTS_API_ERROR_UTIL_H
#define CKJIT_TESTS_API_ERROR_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckjit/ckjit.h"
#include "test_util.h"

/* Fake, well-aligned device address number i (1, 2, ...): never dereferenced
 * on the host, and argument errors must be found before any device work. */
#define AE_FAKE_DEV(i) ((void *)(uintptr_t)(0x7f0000000000ull + 0x100000ull * (uint64_t)(i)))

static TU_UNUSED char *ae_tmp;      /* temp dir of the group (for the disk cache) */
static TU_UNUSED int ae_has_device; /* a GPU is present: skip the NO_DEVICE checks */

/* Group setup: a temp dir "<tag>" whose "cache" is CKJIT_CACHE_DIR, and
 * ae_has_device. */
static TU_UNUSED int ae_group_setup(const char *tag) {
  ae_tmp = tu_mkdtemp(tag);
  if (!ae_tmp) return -1;
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/cache", ae_tmp);
  setenv("CKJIT_CACHE_DIR", dir, 1);
  ckjit_device_info info;
  memset(&info, 0, sizeof info);
  if (ckjit_get_device_info(&info) != CKJIT_SUCCESS) return -1;
  ae_has_device = info.has_device;
  if (ae_has_device) printf("note: a GPU is present (%s): the NO_DEVICE checks are skipped\n", info.name);
  return 0;
}

static TU_UNUSED int ae_group_teardown(void **state) {
  (void)state;
  ckjit_shutdown();
  tu_rm_rf(ae_tmp);
  free(ae_tmp);
  return 0;
}

/* Skips the current test where a GPU is present ("SKIP <what> checks"). */
#define AE_SKIP_IF_DEVICE(what)                                  \
  do {                                                           \
    if (ae_has_device) {                                         \
      printf("SKIP %s checks: a GPU is present\n", (what));      \
      skip();                                                    \
    }                                                            \
  } while (0)

/* What one call left behind on its thread. */
typedef struct ae_result {
  ckjit_status status, last_status;
  char message[2048];
} ae_result;

typedef ckjit_status (*ae_call_fn)(const void *call);

typedef struct ae_job {
  ae_call_fn fn;
  const void *call;
  ae_result r;
} ae_job;

static TU_UNUSED void *ae_job_thread(void *p) {
  ae_job *j = p;
  j->r.status = j->fn(j->call);
  j->r.last_status = ckjit_last_status();
  snprintf(j->r.message, sizeof j->r.message, "%s", ckjit_last_error());
  return NULL;
}

/* Runs fn(call) on a fresh thread, so that its error state is its own. */
static TU_UNUSED ae_result ae_run(ae_call_fn fn, const void *call) {
  ae_job j;
  memset(&j, 0, sizeof j);
  j.fn = fn;
  j.call = call;
  assert_int_equal(tu_run_in_thread(ae_job_thread, &j), 0);
  return j.r;
}

/* Runs fn(call) on a fresh thread: its status must be `want` or `alt` (alt ==
 * CKJIT_SUCCESS: no alternative), ckjit_last_status() must agree, and there
 * must be a message; with a function name `name`, an argument error's message
 * must name it.  `what` names the case in failures. */
static TU_UNUSED void ae_expect(ae_call_fn fn, const void *call, const char *name, const char *what,
                                ckjit_status want, ckjit_status alt) {
  const ae_result r = ae_run(fn, call);
  const char *n = name ? name : "", *sep = name ? ": " : "";
  if (r.status != want && (alt == CKJIT_SUCCESS || r.status != alt)) {
    print_error("%s%s%s: got %s, want %s%s%s (%s)\n", n, sep, what, ckjit_status_string(r.status),
                ckjit_status_string(want), alt ? " or " : "", alt ? ckjit_status_string(alt) : "", r.message);
    fail();
  }
  if (r.last_status != r.status) {
    print_error("%s%s%s: returned %s but ckjit_last_status() is %s\n", n, sep, what,
                ckjit_status_string(r.status), ckjit_status_string(r.last_status));
    fail();
  }
  if (!r.message[0]) {
    print_error("%s%s%s: %s without a message\n", n, sep, what, ckjit_status_string(r.status));
    fail();
  }
  if (name && (r.status == CKJIT_ERROR_INVALID_ARGUMENT || r.status == CKJIT_ERROR_UNSUPPORTED) &&
      !strstr(r.message, name)) {
    print_error("%s: %s: the message does not name the function: \"%s\"\n", name, what, r.message);
    fail();
  }
}

/* One case: the `call` (the including file's type) that `make` returns,
 * changed by the statements that follow (which may use c), then passed to
 * `check`.  E.g. AE_CASE(invalid, base(F_SOFTMAX, "x NULL"), c.x = NULL). */
#define AE_CASE(check, make, ...) \
  do {                            \
    call c = (make);              \
    __VA_ARGS__;                  \
    check(c);                     \
  } while (0)

#endif
