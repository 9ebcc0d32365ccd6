/* The remote tier's pure parts, without a server (cmocka): the URL grammar
 * and its redaction (the password never printed, also for URLs that do not
 * parse), the settings from the environment, the password file, the names
 * and the circuit breaker's state machine. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache/remote.h"
#include "cache/remote_redis.h"
#include "cache/remote_url.h"
#include "ckjit/ckjit.h"
#include "test_util.h"

static ckjit_remote_url parse_ok(const char *text) {
  ckjit_remote_url u;
  char why[256];
  if (ckjit__remote_url_parse(text, &u, why, sizeof why) != 0)
    fail_msg("%s: refused: %s", text, why);
  return u;
}

static void test_tcp_urls(void **state) {
  (void)state;
  ckjit_remote_url u = parse_ok("redis://localhost");
  assert_int_equal(u.transport, CKJIT_REMOTE_TCP);
  assert_string_equal(u.host, "localhost");
  assert_int_equal(u.port, 6379);
  assert_int_equal(u.db, 0);
  assert_false(u.has_password);
  assert_string_equal(u.user, "");
  assert_string_equal(u.display, "redis://localhost");

  u = parse_ok("redis://cache.internal:7000/3");
  assert_string_equal(u.host, "cache.internal");
  assert_int_equal(u.port, 7000);
  assert_int_equal(u.db, 3);

  u = parse_ok("redis://alice:s3cr3t@10.0.0.5:6380/2");
  assert_string_equal(u.user, "alice");
  assert_string_equal(u.password, "s3cr3t");
  assert_true(u.has_password);
  assert_string_equal(u.host, "10.0.0.5");
  assert_int_equal(u.port, 6380);
  assert_int_equal(u.db, 2);
  assert_string_equal(u.display, "redis://alice:***@10.0.0.5:6380/2");

  u = parse_ok("redis://:onlypw@h");
  assert_string_equal(u.user, "");
  assert_string_equal(u.password, "onlypw");
  assert_string_equal(u.display, "redis://:***@h");

  u = parse_ok("redis://bob@h:1");
  assert_string_equal(u.user, "bob");
  assert_false(u.has_password);
  assert_int_equal(u.port, 1);

  u = parse_ok("redis://u:p%40ss%3Aw%2Fd@h/");
  assert_string_equal(u.password, "p@ss:w/d");
  assert_int_equal(u.db, 0);
  assert_null(strstr(u.display, "p%40"));

  u = parse_ok("redis://u:a@b@host"); /* the last '@' ends the userinfo */
  assert_string_equal(u.password, "a@b");
  assert_string_equal(u.host, "host");

  u = parse_ok("redis://[::1]:6390");
  assert_string_equal(u.host, "::1");
  assert_int_equal(u.port, 6390);
  u = parse_ok("redis://h:65535");
  assert_int_equal(u.port, 65535);
}

static void test_unix_urls(void **state) {
  (void)state;
  ckjit_remote_url u = parse_ok("unix:///run/redis/redis.sock");
  assert_int_equal(u.transport, CKJIT_REMOTE_UNIX);
  assert_string_equal(u.path, "/run/redis/redis.sock");
  assert_int_equal(u.db, 0);
  u = parse_ok("unix://u:pw@/tmp/r.sock?db=5");
  assert_string_equal(u.user, "u");
  assert_string_equal(u.password, "pw");
  assert_string_equal(u.path, "/tmp/r.sock");
  assert_int_equal(u.db, 5);
  assert_string_equal(u.display, "unix://u:***@/tmp/r.sock?db=5");
  u = parse_ok("unix:///tmp/a@b.sock"); /* an '@' in a path is not userinfo */
  assert_string_equal(u.path, "/tmp/a@b.sock");
  assert_false(u.has_password);
}

/* Refused with a message containing `needle`, never the password. */
static void refused(const char *text, const char *needle, const char *secret) {
  ckjit_remote_url u;
  char why[256];
  if (ckjit__remote_url_parse(text, &u, why, sizeof why) == 0) fail_msg("%s: accepted", text);
  if (!strstr(why, needle)) fail_msg("%s: message '%s' lacks '%s'", text, why, needle);
  if (secret) {
    assert_null(strstr(why, secret));
    assert_null(strstr(u.display, secret));
  }
  if (!*text) return; /* "" is "off" through the option */
  /* Through the option's path: CKJIT_ERROR_INVALID_ARGUMENT, redacted. */
  ckjit_remote_config cfg;
  ckjit_status st = ckjit__remote_config_url(&cfg, text, "ckjit_options.remote_cache");
  if (ckjit__redis_available()) assert_int_equal(st, CKJIT_ERROR_INVALID_ARGUMENT);
  else assert_int_equal(st, CKJIT_ERROR_UNSUPPORTED);
  assert_false(cfg.enabled);
  assert_non_null(strstr(ckjit_last_error(), "ckjit_options.remote_cache="));
  if (secret) assert_null(strstr(ckjit_last_error(), secret));
}

static void test_bad_urls(void **state) {
  (void)state;
  refused("", "empty", NULL);
  refused("localhost:6379", "no scheme", NULL);
  refused("http://h", "unknown scheme", NULL);
  refused("rediss://u:tlspw@h", "TLS", "tlspw");
  refused("redis://", "no host", NULL);
  refused("redis://u:nohostpw@", "no host", "nohostpw");
  refused("redis://h:0", "1..65535", NULL);
  refused("redis://u:portpw@h:65536", "1..65535", "portpw");
  refused("redis://h:", "no port", NULL);
  refused("redis://h:12ab", "not a number", NULL);
  refused("redis://:typo-pw", "no host", "typo-pw"); /* a password without its '@' */
  refused("redis://h:typo-pw2", "not a number", "typo-pw2");
  refused("redis://h/x", "not a number", NULL);
  refused("redis://h/99999999999", "too large", NULL);
  refused("redis://h/1/2", "unexpected text", NULL);
  refused("redis://h?db=1", "query", NULL);
  refused("redis://u:sp ace@h", "blank", "sp ace");
  refused("redis://u:ctl\tpw@h", "control", "ctl\tpw");
  refused("redis://h%zz", "host", NULL);
  refused("redis://u:bad%zzpw@h", "percent", "bad%zzpw");
  refused("redis://[::1", "unclosed", NULL);
  refused("redis://[zz]:1", "IPv6", NULL);
  refused("unix://relative.sock", "absolute", NULL);
  refused("unix://u:upw@relative", "absolute", "upw");
  refused("unix:///", "no socket path", NULL);
  refused("unix:///tmp/r.sock?timeout=1", "?db=N", NULL);
  char long_path[300] = "unix:///";
  memset(long_path + 8, 'a', 200);
  long_path[208] = '\0';
  refused(long_path, "longer than 107", NULL);
  char *huge = malloc(2000);
  memcpy(huge, "redis://", 8);
  memset(huge + 8, 'h', 1500);
  huge[1508] = '\0';
  refused(huge, "longer than 1023", NULL);
  free(huge);
}

static void test_redaction(void **state) {
  (void)state;
  char out[256];
  const struct {
    const char *in, *out;
  } cases[] = {
      {"redis://u:pw@h:1/2", "redis://u:***@h:1/2"},
      {"redis://:pw@h", "redis://:***@h"},
      {"redis://u@h", "redis://u@h"},
      {"redis://h:6379/0", "redis://h:6379/0"},
      {"redis://h:secret", "redis://h:***"},
      {"redis://:secret", "redis://:***"},
      {"redis://[::1]:6379", "redis://[::1]:6379"},
      {"unix://u:pw@/s.sock", "unix://u:***@/s.sock"},
      {"u:pw@h", "u:***@h"},
      {"garbage://a:b:c@d", "garbage://a:***@d"},
      {"", ""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ckjit__remote_url_redact(cases[i].in, out, sizeof out);
    if (strcmp(out, cases[i].out)) fail_msg("redact(%s) = %s, expected %s", cases[i].in, out,
                                            cases[i].out);
  }
  ckjit__remote_url_redact("redis://u:pw@host", out, 10); /* truncated, still terminated */
  assert_int_equal(strlen(out), 9);
}

static void test_names(void **state) {
  (void)state;
  ckjit_key key, back;
  for (int i = 0; i < 16; i++) key.bytes[i] = (uint8_t)(i * 17 + 3);
  char name[CKJIT_REMOTE_NAME_MAX], lease[CKJIT_REMOTE_NAME_MAX];
  ckjit__remote_entry_name(&key, name);
  ckjit__remote_lease_name(&key, lease);
  char hex[33], want[80];
  ckjit__key_hex(&key, hex);
  tu_fmt(want, sizeof want, "ckjit:v1:%s", hex);
  assert_string_equal(name, want);
  tu_fmt(want, sizeof want, "ckjit:v1:lease:%s", hex);
  assert_string_equal(lease, want);
  assert_int_equal(ckjit__remote_name_key(name, strlen(name), &back), 1);
  assert_memory_equal(back.bytes, key.bytes, 16);
  assert_int_equal(ckjit__remote_name_key(lease, strlen(lease), &back), 0);
  assert_int_equal(ckjit__remote_name_key("ckjit:v1:XYZ", 12, &back), 0);
  tu_fmt(want, sizeof want, "ckjit:v2:%s", hex);
  assert_int_equal(ckjit__remote_name_key(want, strlen(want), &back), 0);
  tu_fmt(want, sizeof want, "ckjit:v1:%s", hex);
  want[12] = 'G';
  assert_int_equal(ckjit__remote_name_key(want, strlen(want), &back), 0);
}

static void test_breaker(void **state) {
  (void)state;
  ckjit_breaker b;
  memset(&b, 0, sizeof b);
  double t = 1000;
  assert_true(ckjit__breaker_allow(&b, t));
  assert_true(ckjit__breaker_allow(&b, t)); /* closed: everyone goes */
  assert_int_equal(ckjit__breaker_failure(&b, t), 1); /* opened: warn */
  assert_false(ckjit__breaker_allow(&b, t + 999));
  /* After 1 s one probe goes, the others wait for its outcome. */
  assert_true(ckjit__breaker_allow(&b, t + 1000));
  assert_false(ckjit__breaker_allow(&b, t + 1001));
  assert_int_equal(ckjit__breaker_failure(&b, t + 1100), 0); /* no second warning */
  /* Doubling: 2 s, 4 s, ... capped at 60 s. */
  assert_false(ckjit__breaker_allow(&b, t + 1100 + 1999));
  assert_true(ckjit__breaker_allow(&b, t + 1100 + 2000));
  double now = t + 3100, expect = 4000;
  for (int i = 0; i < 10; i++) {
    ckjit__breaker_failure(&b, now);
    assert_true(b.backoff_ms == expect);
    assert_false(ckjit__breaker_allow(&b, now + expect - 1));
    assert_true(ckjit__breaker_allow(&b, now + expect));
    now += expect;
    expect = expect * 2 > 60000 ? 60000 : expect * 2;
  }
  /* A cancelled probe lets the next caller probe. */
  ckjit__breaker_cancel(&b);
  assert_true(ckjit__breaker_allow(&b, now));
  assert_int_equal(ckjit__breaker_success(&b), 1); /* was open */
  assert_true(ckjit__breaker_allow(&b, now));
  assert_int_equal(ckjit__breaker_success(&b), 0);
  assert_int_equal(ckjit__breaker_failure(&b, now), 1);
  assert_true(b.backoff_ms == 1000); /* back to the start after a success */
}

static void clear_env(void) {
  const char *const vars[] = {"CKJIT_REMOTE_CACHE", "CKJIT_REMOTE_CACHE_PASSWORD_FILE",
                              "CKJIT_REMOTE_CACHE_CONNECT_TIMEOUT_MS", "CKJIT_REMOTE_CACHE_TIMEOUT_MS",
                              "CKJIT_REMOTE_CACHE_TTL", "CKJIT_REMOTE_CACHE_LEASE_MS",
                              "CKJIT_REMOTE_CACHE_WAIT_MS", "CKJIT_REMOTE_CACHE_MAX_ENTRY"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void test_settings(void **state) {
  (void)state;
  if (!ckjit__redis_available()) skip();
  clear_env();
  ckjit_remote_config cfg;
  ckjit__remote_config_env(&cfg);
  assert_false(cfg.enabled); /* unset: off */
  setenv("CKJIT_REMOTE_CACHE", "redis://h", 1);
  ckjit__remote_config_env(&cfg);
  assert_true(cfg.enabled);
  assert_int_equal(cfg.connect_timeout_ms, 100);
  assert_int_equal(cfg.timeout_ms, 1000);
  assert_int_equal(cfg.lease_ms, 10000);
  assert_int_equal(cfg.wait_ms, 30000);
  assert_int_equal(cfg.ttl_s, 0);
  assert_true(cfg.max_entry == 64ull << 20);
  setenv("CKJIT_REMOTE_CACHE_CONNECT_TIMEOUT_MS", "250", 1);
  setenv("CKJIT_REMOTE_CACHE_TIMEOUT_MS", "2000", 1);
  setenv("CKJIT_REMOTE_CACHE_TTL", "86400", 1);
  setenv("CKJIT_REMOTE_CACHE_LEASE_MS", "5000", 1);
  setenv("CKJIT_REMOTE_CACHE_WAIT_MS", "0", 1);
  setenv("CKJIT_REMOTE_CACHE_MAX_ENTRY", "8M", 1);
  ckjit__remote_config_env(&cfg);
  assert_int_equal(cfg.connect_timeout_ms, 250);
  assert_int_equal(cfg.timeout_ms, 2000);
  assert_int_equal(cfg.ttl_s, 86400);
  assert_int_equal(cfg.lease_ms, 5000);
  assert_int_equal(cfg.wait_ms, 0);
  assert_true(cfg.max_entry == 8ull << 20);
  /* Bad numbers: the defaults (and a warning). */
  setenv("CKJIT_REMOTE_CACHE_TIMEOUT_MS", "1s", 1);
  setenv("CKJIT_REMOTE_CACHE_LEASE_MS", "10", 1); /* below 100 */
  setenv("CKJIT_REMOTE_CACHE_MAX_ENTRY", "1T", 1); /* over 512M */
  ckjit__remote_config_env(&cfg);
  assert_true(cfg.enabled);
  assert_int_equal(cfg.timeout_ms, 1000);
  assert_int_equal(cfg.lease_ms, 10000);
  assert_true(cfg.max_entry == 64ull << 20);
  /* A bad URL: off. */
  setenv("CKJIT_REMOTE_CACHE", "redis://u:pw@h:nope", 1);
  ckjit__remote_config_env(&cfg);
  assert_false(cfg.enabled);
  clear_env();
}

static void test_password_file(void **state) {
  (void)state;
  if (!ckjit__redis_available()) skip();
  clear_env();
  char *dir = tu_mkdtemp("remote-pw");
  char file[1024];
  tu_fmt(file, sizeof file, "%s/pw", dir);
  assert_int_equal(tu_write_file(file, "from-file\r\n", 11), 0);
  setenv("CKJIT_REMOTE_CACHE_PASSWORD_FILE", file, 1);
  ckjit_remote_config cfg;
  assert_int_equal(ckjit__remote_config_url(&cfg, "redis://u:inurl@h", "t"), CKJIT_SUCCESS);
  assert_string_equal(cfg.url.password, "from-file"); /* the file replaces the URL's */
  assert_string_equal(cfg.url.user, "u");
  assert_true(cfg.url.has_password);
  assert_int_equal(ckjit__remote_config_url(&cfg, "redis://h", "t"), CKJIT_SUCCESS);
  assert_string_equal(cfg.url.password, "from-file");
  assert_string_equal(cfg.url.display, "redis://h"); /* never shown */
  assert_int_equal(tu_write_file(file, "two\nlines\n", 10), 0);
  assert_int_equal(ckjit__remote_config_url(&cfg, "redis://h", "t"), CKJIT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(ckjit_last_error(), "one line"));
  assert_null(strstr(ckjit_last_error(), "lines"));
  tu_fmt(file, sizeof file, "%s/missing", dir);
  setenv("CKJIT_REMOTE_CACHE_PASSWORD_FILE", file, 1);
  assert_int_equal(ckjit__remote_config_url(&cfg, "redis://h", "t"), CKJIT_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(ckjit_last_error(), "No such file"));
  assert_int_equal(ckjit__remote_config_url(&cfg, "", "t"), CKJIT_SUCCESS); /* "": off */
  assert_false(cfg.enabled);
  clear_env();
  tu_rm_rf(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tcp_urls),     cmocka_unit_test(test_unix_urls),
      cmocka_unit_test(test_bad_urls),     cmocka_unit_test(test_redaction),
      cmocka_unit_test(test_names),        cmocka_unit_test(test_breaker),
      cmocka_unit_test(test_settings),     cmocka_unit_test(test_password_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
