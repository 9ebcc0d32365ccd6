/* The remote cache tier end to end, against a real redis-server (one per
 * case, started and stopped here), with processes of a fleet played by
 * remote_helper (ckjit_compile_spec in a fresh process, its own empty
 * CKJIT_CACHE_DIR).  This file: the tier as each process meets the server,
 * one process at a time (what it stores and lets in, who may use it, how
 * it fails open, how it is configured), and the case table and main;
 * test_remote_fleet.c: several processes and the tools on one server.
 *
 *   test_remote CASE HELPER CKJIT_CACHE CKJIT_PREWARM
 *
 *   roundtrip  a compile lands in Redis under ckjit:v1:<key> as the disk entry's
 *              very bytes; a second process with an empty cache compiles
 *              nothing, counts a remote hit and gets the entry on its disk; TTL,
 *              the size bound
 *   rejects    a corrupted, a truncated, a foreign (entry A under key B) and a
 *              garbage value: rejected, counted, recompiled, replaced, and
 *              never loaded (the code object is the clean one)
 *   auth       a wrong password fails open with one warning that shows no
 *              password; the right one, a password file, a database number; an
 *              ACL user without SET reads (hits) and its writes fail open
 *   down       the server killed while a process compiles: every call
 *              succeeds, one warning, the breaker stops the next lookups
 *   paused     the server asleep (DEBUG SLEEP): a lookup costs one timeout,
 *              the next none
 *   options    ckjit_options.remote_cache
 *   disabled   a build without hiredis: the variable warns once and is
 *              ignored, the option is CKJIT_ERROR_UNSUPPORTED
 *   lease, fleet, tools: test_remote_fleet.c
 *
 * Skips (exit 77) with the reason when redis-server is not on PATH, the
 * library has no Redis support (except `disabled`), or no compiler (NVRTC
 * for sm_90, else hipRTC for gfx90a) is present. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/remote.h"
#include "cache/remote_redis.h"
#include "ckjit/ckjit.h"
#include "remote_cases.h"

/* remote_test_util.h's and remote_cases.h's shared settings and server. */
const char *g_helper, *g_cache_tool, *g_prewarm_tool;
char *g_work;
const char *g_arch = "sm_90";
int g_checks;
int g_proc_seq;
rs_server g_srv;

/* ---- roundtrip ------------------------------------------------------------- */
static void case_roundtrip(void) {
  start_server(0, NULL);
  const char *a = work_dir("a"), *b = work_dir("b");
  const char *one[] = {SPECS[0], NULL};
  proc p;
  helper_run(&p, a, g_srv.url, NULL, NULL, one, 0);
  CHECK(stat_of(&p, "compiles") == 1 && stat_of(&p, "remote_misses") == 1 &&
            stat_of(&p, "remote_writes") == 1 && stat_of(&p, "remote_hits") == 0 &&
            stat_of(&p, "remote_errors") == 0,
        "first process: %s", p.out);
  char hex[40], path[1200], name[CKJIT_REMOTE_NAME_MAX];
  call_str(&p, 0, "key", hex, sizeof hex);
  double size = call_num(&p, 0, "size");
  proc_free(&p);
  uint8_t *value;
  size_t len;
  CHECK(value_ok(hex, &value, &len), "ckjit:v1:%s missing or refused", hex);
  entry_file(a, hex, path, sizeof path);
  CHECK(same_file_bytes(path, value, len), "the value is not the disk entry's bytes");
  entry_name(hex, name, sizeof name);
  const char *pttl[] = {"PTTL", name, NULL};
  CHECK(rs_int(&g_srv, pttl) == -1, "no TTL was asked for");
  char lease[CKJIT_REMOTE_NAME_MAX];
  tu_fmt(lease, sizeof lease, "%s%s", CKJIT_REMOTE_LEASE_PREFIX, hex);
  const char *exists[] = {"EXISTS", lease, NULL};
  CHECK(rs_int(&g_srv, exists) == 0, "the lease was left behind");

  /* A second process, empty cache: a remote hit, nothing compiled, the
   * entry on its disk. */
  helper_run(&p, b, g_srv.url, NULL, NULL, one, 0);
  CHECK(stat_of(&p, "compiles") == 0 && stat_of(&p, "remote_hits") == 1 &&
            stat_of(&p, "remote_misses") == 0 && call_num(&p, 0, "cached") == 1 &&
            call_num(&p, 0, "size") == size,
        "second process: %s", p.out);
  proc_free(&p);
  entry_file(b, hex, path, sizeof path);
  CHECK(same_file_bytes(path, value, len), "the hit was not written to the local disk cache");
  verify_cache(b);
  free(value);

  /* The disk comes first: nothing asked of Redis. */
  helper_run(&p, a, g_srv.url, NULL, NULL, one, 0);
  CHECK(stat_of(&p, "disk_hits") == 1 && stat_of(&p, "remote_hits") == 0 &&
            stat_of(&p, "remote_misses") == 0,
        "local hit: %s", p.out);
  proc_free(&p);

  /* CKJIT_REMOTE_CACHE_TTL. */
  const char *ttl_env[] = {"CKJIT_REMOTE_CACHE_TTL=100", NULL};
  const char *two[] = {SPECS[1], NULL};
  helper_run(&p, work_dir("c"), g_srv.url, ttl_env, NULL, two, 0);
  call_str(&p, 0, "key", hex, sizeof hex);
  proc_free(&p);
  entry_name(hex, name, sizeof name);
  long long ms = rs_int(&g_srv, pttl);
  CHECK(ms > 90000 && ms <= 100000, "PTTL %lld, expected about 100 s", ms);

  /* CKJIT_REMOTE_CACHE_MAX_ENTRY: larger entries are not sent. */
  const char *max_env[] = {"CKJIT_REMOTE_CACHE_MAX_ENTRY=1K", NULL};
  const char *three[] = {SPECS[2], NULL};
  helper_run(&p, work_dir("d"), g_srv.url, max_env, NULL, three, 0);
  CHECK(stat_of(&p, "compiles") == 1 && stat_of(&p, "remote_writes") == 0 &&
            stat_of(&p, "remote_errors") == 0,
        "max entry: %s", p.out);
  call_str(&p, 0, "key", hex, sizeof hex);
  proc_free(&p);
  entry_name(hex, name, sizeof name);
  const char *ex[] = {"EXISTS", name, NULL};
  CHECK(rs_int(&g_srv, ex) == 0, "an entry over CKJIT_REMOTE_CACHE_MAX_ENTRY was sent");
}

/* ---- rejects --------------------------------------------------------------- */
/* The process meets `bad` under spec s's key: rejected, recompiled (the
 * clean code object), replaced in Redis. */
static void expect_rejected(int s, const char *hex, double clean_size, const uint8_t *bad,
                            size_t bad_len, const char *what) {
  char name[CKJIT_REMOTE_NAME_MAX];
  entry_name(hex, name, sizeof name);
  CHECK(rs_set(&g_srv, name, bad, bad_len) == 0, "SET");
  const char *spec[] = {SPECS[s], NULL};
  proc p;
  char tag[64];
  tu_fmt(tag, sizeof tag, "rej-%s", what);
  const char *dir = work_dir(tag);
  helper_run(&p, dir, g_srv.url, NULL, NULL, spec, 0);
  char got[40];
  call_str(&p, 0, "key", got, sizeof got);
  CHECK(stat_of(&p, "remote_rejects") == 1 && stat_of(&p, "remote_hits") == 0 &&
            stat_of(&p, "remote_misses") == 1 && stat_of(&p, "compiles") == 1 &&
            stat_of(&p, "remote_writes") == 1,
        "%s value: %s", what, p.out);
  CHECK(!strcmp(got, hex) && call_num(&p, 0, "size") == clean_size,
        "%s value: the code object is not the clean one: %s", what, p.out);
  CHECK(occurrences(p.err, "rejected") == 1, "%s value: one warning expected: %s", what, p.err);
  proc_free(&p);
  uint8_t *value;
  size_t len;
  CHECK(value_ok(hex, &value, &len), "%s value was not replaced by a good one", what);
  char path[1200];
  entry_file(dir, hex, path, sizeof path);
  CHECK(same_file_bytes(path, value, len), "%s: local entry differs from the replacement", what);
  free(value);
  verify_cache(dir);
}

static void case_rejects(void) {
  start_server(0, NULL);
  const char *both[] = {SPECS[0], SPECS[6], NULL};
  proc p;
  helper_run(&p, work_dir("prime"), g_srv.url, NULL, NULL, both, 0);
  CHECK(stat_of(&p, "remote_writes") == 2, "priming: %s", p.out);
  char ka[40], kb[40];
  call_str(&p, 0, "key", ka, sizeof ka);
  call_str(&p, 1, "key", kb, sizeof kb);
  const double size_a = call_num(&p, 0, "size"), size_b = call_num(&p, 1, "size");
  proc_free(&p);
  uint8_t *va, *vb;
  size_t la, lb;
  CHECK(value_ok(ka, &va, &la) && value_ok(kb, &vb, &lb), "primed values");

  uint8_t *bad = malloc(la);
  memcpy(bad, va, la);
  bad[la - 64] ^= 0x5a; /* in the code object: the payload checksum fails */
  expect_rejected(0, ka, size_a, bad, la, "corrupted");
  memcpy(bad, va, la);
  bad[20] ^= 0x01; /* in the header's key */
  expect_rejected(0, ka, size_a, bad, la, "header");
  expect_rejected(0, ka, size_a, va, la / 2, "truncated");
  expect_rejected(6, kb, size_b, va, la, "foreign"); /* entry A's bytes under key B */
  expect_rejected(6, kb, size_b, (const uint8_t *)"not an entry", 12, "garbage");
  free(bad);
  free(va);
  free(vb);
}

/* ---- auth ------------------------------------------------------------------ */
static void case_auth(void) {
  start_server(1, "adminpw");
  char url[800];
  proc p;
  /* A wrong password: fails open, one warning, no password in it. */
  tu_fmt(url, sizeof url, "redis://:wrongpw@127.0.0.1:%d", g_srv.port);
  const char *two[] = {SPECS[0], SPECS[1], NULL};
  helper_run(&p, work_dir("wrong"), url, NULL, NULL, two, 0);
  CHECK(stat_of(&p, "compiles") == 2 && stat_of(&p, "remote_hits") == 0 &&
            stat_of(&p, "remote_errors") >= 1 && stat_of(&p, "remote_errors") <= 2,
        "wrong password: %s", p.out);
  CHECK(occurrences(p.err, "unusable") == 1 && strstr(p.err, "WRONGPASS") &&
            strstr(p.err, ":***@") && !strstr(p.err, "wrongpw"),
        "wrong password: one redacted warning expected:\n%s", p.err);
  proc_free(&p);

  /* The right one in the URL, then from a file. */
  tu_fmt(url, sizeof url, "redis://:adminpw@127.0.0.1:%d", g_srv.port);
  const char *one[] = {SPECS[0], NULL};
  helper_run(&p, work_dir("right"), url, NULL, NULL, one, 0);
  CHECK(stat_of(&p, "remote_writes") == 1 && stat_of(&p, "remote_errors") == 0, "password: %s",
        p.out);
  proc_free(&p);
  char file[900], env[1000];
  tu_fmt(file, sizeof file, "%s/password", g_work);
  CHECK(tu_write_file(file, "adminpw\n", 8) == 0, "password file");
  tu_fmt(env, sizeof env, "CKJIT_REMOTE_CACHE_PASSWORD_FILE=%s", file);
  const char *file_env[] = {env, NULL};
  tu_fmt(url, sizeof url, "redis://127.0.0.1:%d", g_srv.port);
  helper_run(&p, work_dir("file"), url, file_env, NULL, one, 0);
  CHECK(stat_of(&p, "remote_hits") == 1 && stat_of(&p, "compiles") == 0, "password file: %s",
        p.out);
  CHECK(!strstr(p.err, "adminpw"), "the password was printed: %s", p.err);
  proc_free(&p);

  /* A database number. */
  tu_fmt(url, sizeof url, "redis://:adminpw@127.0.0.1:%d/3", g_srv.port);
  const char *db_spec[] = {SPECS[4], NULL};
  helper_run(&p, work_dir("db"), url, NULL, NULL, db_spec, 0);
  CHECK(stat_of(&p, "remote_writes") == 1, "db 3: %s", p.out);
  proc_free(&p);
  const char *size3[] = {"DBSIZE", NULL};
  int fd = rs_connect(&g_srv);
  resp_reply r;
  const char *sel[2] = {"SELECT", "3"};
  CHECK(fd >= 0 && resp_call(fd, &r, 2, sel, NULL) == 0 && r.type == '+', "SELECT 3");
  resp_free(&r);
  CHECK(resp_call(fd, &r, 1, size3, NULL) == 0 && r.type == ':' && r.integer == 1,
        "db 3 should hold the one entry");
  resp_free(&r);
  close(fd);

  /* An ACL user that may read but not write. */
  const char *acl[] = {"ACL", "SETUSER", "reader", "on", ">readerpw", "~ckjit:*", "+get",
                       "+exists", "+scan", "-set", NULL};
  CHECK(rs_cmd(&g_srv, &r, acl) == 0 && r.type == '+', "ACL SETUSER: %s", r.str ? r.str : "");
  resp_free(&r);
  tu_fmt(url, sizeof url, "redis://reader:readerpw@127.0.0.1:%d", g_srv.port);
  helper_run(&p, work_dir("reader-hit"), url, NULL, NULL, one, 0);
  CHECK(stat_of(&p, "remote_hits") == 1 && stat_of(&p, "compiles") == 0 &&
            stat_of(&p, "remote_errors") == 0,
        "reader hit: %s", p.out);
  proc_free(&p);
  const char *new_specs[] = {SPECS[2], SPECS[3], NULL};
  helper_run(&p, work_dir("reader-miss"), url, NULL, NULL, new_specs, 0);
  CHECK(stat_of(&p, "compiles") == 2 && stat_of(&p, "remote_writes") == 0 &&
            stat_of(&p, "remote_errors") >= 1,
        "reader miss: %s", p.out);
  CHECK(occurrences(p.err, "refuses writes") == 1 && !strstr(p.err, "readerpw"),
        "reader: one warning expected:\n%s", p.err);
  char hex[40], name[CKJIT_REMOTE_NAME_MAX];
  call_str(&p, 0, "key", hex, sizeof hex);
  proc_free(&p);
  entry_name(hex, name, sizeof name);
  const char *ex[] = {"EXISTS", name, NULL};
  CHECK(rs_int(&g_srv, ex) == 0, "the reader wrote an entry");
}

/* ---- down: the server killed in the middle of a run ------------------------- */
static void case_down(void) {
  start_server(0, NULL);
  const char *specs[] = {SPECS[0], SPECS[1], SPECS[2], NULL};
  const char *opts[] = {"--slow-ms", "700", NULL};
  proc p;
  helper_start(&p, work_dir("down"), g_srv.url, NULL, opts, specs);
  CHECK(proc_wait_for(&p, "compiling", 30000), "the helper never compiled: %s", p.out);
  rs_kill(&g_srv);
  proc_wait(&p, 60000);
  CHECK(p.status == 0, "calls must succeed with the server gone: exit %d\n%s\n%s", p.status, p.out,
        p.err);
  CHECK(stat_of(&p, "compiles") == 3 && stat_of(&p, "remote_hits") == 0, "down: %s", p.out);
  /* The store after the kill fails; the breaker then skips the next
   * lookups (no connect, no time) and lets one probe through per window. */
  CHECK(stat_of(&p, "remote_errors") >= 1 && stat_of(&p, "remote_errors") <= 3, "down: %s", p.out);
  CHECK(call_num(&p, 1, "remote_ms") < 50 && call_num(&p, 2, "remote_ms") < 50,
        "lookups after the failure should be skipped by the breaker: %s", p.out);
  CHECK(occurrences(p.err, "unusable") == 1, "one warning expected:\n%s", p.err);
  printf("down: lookups after the kill took %.2f and %.2f ms (remote errors %.0f)\n",
         call_num(&p, 1, "remote_ms"), call_num(&p, 2, "remote_ms"), stat_of(&p, "remote_errors"));
  proc_free(&p);
}

/* ---- paused: a server that does not answer ---------------------------------- */
static void case_paused(void) {
  start_server(1, NULL);
  int fd = rs_connect(&g_srv);
  const char *sleep_cmd[3] = {"DEBUG", "SLEEP", "4"};
  CHECK(fd >= 0 && resp_send(fd, 3, sleep_cmd, NULL) == 0, "DEBUG SLEEP");
  rs_sleep_ms(200);
  /* the breaker's window far longer than call 0's compile, however slow
   * the build (a sanitizer's) */
  const char *env[] = {"CKJIT_REMOTE_CACHE_TIMEOUT_MS=1000", "CKJIT_REMOTE_CACHE_BACKOFF_MS=30000", NULL};
  const char *specs[] = {SPECS[0], SPECS[1], NULL};
  proc p;
  helper_run(&p, work_dir("paused"), g_srv.url, env, NULL, specs, 0);
  const double first = call_num(&p, 0, "remote_ms"), second = call_num(&p, 1, "remote_ms");
  const double first_call = call_num(&p, 0, "ms") - call_num(&p, 0, "compile_ms");
  printf("paused: first lookup %.1f ms (call without its compile %.1f ms), second %.2f ms\n", first,
         first_call, second);
  CHECK(stat_of(&p, "compiles") == 2 && first >= 900 && first < 1500 && first_call < 1500,
        "the first lookup must cost about one timeout: %s", p.out);
  CHECK(second < 50, "the second must not wait (breaker open): %s", p.out);
  CHECK(occurrences(p.err, "unusable") == 1 && strstr(p.err, "timed out"), "warning:\n%s", p.err);
  proc_free(&p);
  close(fd);
}

/* ---- ckjit_options.remote_cache ---------------------------------------------- */
static void case_options(void) {
  proc p;
  const char *one[] = {SPECS[0], NULL};
  const char *bad[] = {"--option-url", "redis://u:hunter2@host:port", NULL};
  helper_start(&p, work_dir("opt-bad"), NULL, NULL, bad, one);
  proc_wait(&p, 60000);
  CHECK(p.status == 3 && strstr(p.out, "CKJIT_ERROR_INVALID_ARGUMENT") &&
            strstr(p.out, "u:***@") && !strstr(p.out, "hunter2"),
        "a bad option URL: %s", p.out);
  proc_free(&p);
  start_server(0, NULL);
  const char *good[] = {"--option-url", g_srv.url, NULL};
  helper_run(&p, work_dir("opt-good"), NULL, NULL, good, one, 0);
  CHECK(stat_of(&p, "remote_writes") == 1, "the option's server: %s", p.out);
  proc_free(&p);
  const char *off[] = {"--option-url", "", NULL};
  helper_run(&p, work_dir("opt-off"), g_srv.url, NULL, off, one, 0);
  CHECK(stat_of(&p, "remote_misses") == 0 && stat_of(&p, "remote_hits") == 0,
        "\"\" turns the tier off over CKJIT_REMOTE_CACHE: %s", p.out);
  proc_free(&p);
}

/* ---- a build without hiredis ----------------------------------------------- */
static void case_disabled(void) {
  proc p;
  const char *specs[] = {SPECS[0], SPECS[1], NULL};
  helper_run(&p, work_dir("off"), "redis://u:hunter2@127.0.0.1:1", NULL, NULL, specs, 0);
  CHECK(stat_of(&p, "compiles") == 2 && stat_of(&p, "remote_misses") == 0 &&
            stat_of(&p, "remote_errors") == 0,
        "%s", p.out);
  CHECK(occurrences(p.err, "without Redis support") == 1 && !strstr(p.err, "hunter2"),
        "one warning expected:\n%s", p.err);
  proc_free(&p);
  ckjit_remote_config cfg;
  CHECK(ckjit__remote_config_url(&cfg, "redis://u:hunter2@h", "ckjit_options.remote_cache") ==
                CKJIT_ERROR_UNSUPPORTED &&
            !strstr(ckjit_last_error(), "hunter2"),
        "%s", ckjit_last_error());
  const char *opt[] = {"--option-url", "redis://127.0.0.1:1", NULL};
  helper_start(&p, work_dir("off-opt"), NULL, NULL, opt, specs);
  proc_wait(&p, 60000);
  CHECK(p.status == 3 && strstr(p.out, "CKJIT_ERROR_UNSUPPORTED"), "%s", p.out);
  proc_free(&p);
}

static const struct {
  const char *name;
  void (*run)(void);
} CASES[] = {{"roundtrip", case_roundtrip}, {"rejects", case_rejects}, {"auth", case_auth},
             {"down", case_down},           {"paused", case_paused},   {"lease", case_lease},
             {"fleet", case_fleet},         {"tools", case_tools},     {"options", case_options},
             {"disabled", case_disabled}};

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc != 5) {
    fprintf(stderr, "usage: test_remote CASE HELPER CKJIT_CACHE CKJIT_PREWARM\n");
    return 2;
  }
  void (*run)(void) = NULL;
  for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
    if (!strcmp(argv[1], CASES[i].name)) run = CASES[i].run;
  if (!run) {
    fprintf(stderr, "test_remote: unknown case %s\n", argv[1]);
    return 2;
  }
  g_helper = argv[2];
  g_cache_tool = argv[3];
  g_prewarm_tool = argv[4];
  const int disabled_case = !strcmp(argv[1], "disabled");
  if (disabled_case && ckjit__redis_available()) {
    printf("SKIP: this build has Redis support (the case is for builds without it)\n");
    return 77;
  }
  if (!disabled_case && !ckjit__redis_available()) {
    printf("SKIP: this ckjit was built without Redis support (hiredis; meson -Dredis)\n");
    return 77;
  }
  if (!disabled_case && !rs_binary()) {
    printf("SKIP: redis-server is not on PATH (Debian: apt-get install redis-server; "
           "scripts/install-deps.sh installs it)\n");
    return 77;
  }
  /* The tests set the remote settings themselves. */
  const char *const vars[] = {"CKJIT_REMOTE_CACHE", "CKJIT_REMOTE_CACHE_PASSWORD_FILE",
                              "CKJIT_REMOTE_CACHE_CONNECT_TIMEOUT_MS", "CKJIT_REMOTE_CACHE_TIMEOUT_MS",
                              "CKJIT_REMOTE_CACHE_TTL", "CKJIT_REMOTE_CACHE_LEASE_MS",
                              "CKJIT_REMOTE_CACHE_WAIT_MS", "CKJIT_REMOTE_CACHE_MAX_ENTRY",
                              "CKJIT_CACHE_PATH", "CKJIT_CACHE_DISABLE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  g_work = tu_mkdtemp("remote");
  CHECK(g_work, "mkdtemp");
  /* The first compiler present. */
  const char *archs[] = {"sm_90", "gfx90a"};
  int found = 0;
  for (int i = 0; i < 2 && !found; i++) {
    g_arch = archs[i];
    proc p;
    const char *spec[] = {SPECS[6], NULL};
    char tag[32];
    tu_fmt(tag, sizeof tag, "probe-%s", archs[i]);
    helper_start(&p, work_dir(tag), NULL, NULL, NULL, spec);
    proc_wait(&p, 120000);
    found = p.status == 0;
    if (!found) printf("# no compiler for %s here (exit %d)\n", archs[i], p.status);
    proc_free(&p);
  }
  if (!found) {
    tu_rm_rf(g_work);
    printf("SKIP: no runtime compiler (NVRTC for sm_90, hipRTC for gfx90a) on this host\n");
    return 77;
  }
  const double t0 = rs_now_ms();
  run();
  rs_stop(&g_srv);
  printf("%s: %d checks passed in %.1f s (arch %s)\n", argv[1], g_checks, (rs_now_ms() - t0) / 1e3,
         g_arch);
  tu_rm_rf(g_work);
  return 0;
}
