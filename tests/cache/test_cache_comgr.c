/* ckjit__comgr_cache_policy: AMD_COMGR_CACHE=0 unless the user set it.
 * Each case runs in a child process (the policy applies once per process). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cache/comgr_policy.h"

/* In a child: set the variable (NULL: unset), apply the policy twice, exit 0
 * when it then equals `want` (NULL: unset). */
static int child_case(const char *initial, const char *want) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (initial) setenv("AMD_COMGR_CACHE", initial, 1);
    else unsetenv("AMD_COMGR_CACHE");
    ckjit__comgr_cache_policy();
    const char *v = getenv("AMD_COMGR_CACHE");
    int ok = want ? (v && strcmp(v, want) == 0) : v == NULL;
    /* A later change by the user is not overridden by a second call. */
    setenv("AMD_COMGR_CACHE", "user-later", 1);
    ckjit__comgr_cache_policy();
    v = getenv("AMD_COMGR_CACHE");
    ok = ok && v && strcmp(v, "user-later") == 0;
    _exit(ok ? 0 : 1);
  }
  int status;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_unset_turns_comgr_cache_off(void **state) {
  (void)state;
  assert_int_equal(child_case(NULL, "0"), 0);
}

static void test_user_choice_wins(void **state) {
  (void)state;
  assert_int_equal(child_case("1", "1"), 0);
  assert_int_equal(child_case("0", "0"), 0);
  assert_int_equal(child_case("", ""), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unset_turns_comgr_cache_off),
      cmocka_unit_test(test_user_choice_wins),
  };
  return cmocka_run_group_tests_name("cache_comgr", tests, NULL, NULL);
}
