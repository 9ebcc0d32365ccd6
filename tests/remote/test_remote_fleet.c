/* The remote cache tier shared, the cases of test_remote that run several
 * processes and the tools on one redis-server (test_remote.c has main, the
 * usage and the other cases; remote_cases.h what the two files share).
 * Sharing is what the tier is for: a fleet must compile each kernel once,
 * and nothing that it or the tools leave in Redis or on disk may be bad.
 *
 *   lease      a leaseholder SIGKILLed while compiling: the waiters finish
 *              within the lease period plus a margin, compiling once; a
 *              lease renewed through a compile longer than it; the wait bound
 *   fleet      4 processes x 2 threads x 8 specs into 4 empty caches and one
 *              empty Redis: 8 compiles in all, every cache verifies
 *   tools      ckjit-prewarm --remote, ckjit-cache info / pull / push --remote */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote_cases.h"

/* ---- lease ------------------------------------------------------------------ */
static void lease_crash(void) {
  const char *env[] = {"CKJIT_REMOTE_CACHE_LEASE_MS=1500", NULL};
  const char *spec[] = {SPECS[0], NULL};
  const char *slow[] = {"--slow-ms", "60000", NULL};
  proc holder;
  helper_start(&holder, work_dir("holder"), g_srv.url, env, slow, spec);
  CHECK(proc_wait_for(&holder, "compiling", 30000), "the holder never compiled: %s", holder.out);
  const char *keys[] = {"KEYS", CKJIT_REMOTE_LEASE_PREFIX "*", NULL};
  resp_reply r;
  CHECK(rs_cmd(&g_srv, &r, keys) == 0 && r.elements == 1, "one lease expected");
  resp_free(&r);
  kill(holder.pid, SIGKILL);
  const double killed = rs_now_ms();
  proc_wait(&holder, 10000);
  proc_free(&holder);

  const char *threads[] = {"--threads", "2", NULL};
  proc w1, w2;
  helper_start(&w1, work_dir("waiter1"), g_srv.url, env, threads, spec);
  helper_start(&w2, work_dir("waiter2"), g_srv.url, env, threads, spec);
  proc_wait(&w1, 60000);
  proc_wait(&w2, 60000);
  const double took = (w1.ended_ms > w2.ended_ms ? w1.ended_ms : w2.ended_ms) - killed;
  printf("lease: waiters done %.0f ms after the holder was killed (lease 1500 ms); compiles %.0f + "
         "%.0f\n",
         took, stat_of(&w1, "compiles"), stat_of(&w2, "compiles"));
  CHECK(w1.status == 0 && w2.status == 0, "waiters: %s\n%s\n%s\n%s", w1.out, w1.err, w2.out, w2.err);
  CHECK(stat_of(&w1, "compiles") + stat_of(&w2, "compiles") == 1, "compiled once: %s\n%s", w1.out,
        w2.out);
  CHECK(stat_of(&w1, "remote_lease_waits") >= 1 && stat_of(&w2, "remote_lease_waits") >= 1,
        "both waited: %s\n%s", w1.out, w2.out);
  /* The lease outlives the holder by at most one period (renewed every 500
   * ms, so 1000..1500 ms); a compile and process start-up on top. */
  CHECK(took >= 900 && took < 1500 + 5000, "waiters took %.0f ms", took);
  proc_free(&w1);
  proc_free(&w2);
}

static void lease_renewed(void) {
  const char *env[] = {"CKJIT_REMOTE_CACHE_LEASE_MS=600", NULL};
  const char *spec[] = {SPECS[1], NULL};
  const char *slow[] = {"--slow-ms", "2500", NULL};
  proc holder, w;
  helper_start(&holder, work_dir("renew-holder"), g_srv.url, env, slow, spec);
  CHECK(proc_wait_for(&holder, "compiling", 30000), "the holder never compiled");
  helper_run(&w, work_dir("renew-waiter"), g_srv.url, env, NULL, spec, 0);
  proc_wait(&holder, 60000);
  CHECK(holder.status == 0 && stat_of(&holder, "remote_writes") == 1, "holder: %s\n%s", holder.out,
        holder.err);
  /* Renewed every 200 ms through a 2.5 s compile: the waiter never took over. */
  CHECK(stat_of(&w, "compiles") == 0 && stat_of(&w, "remote_hits") == 1 &&
            stat_of(&w, "remote_lease_waits") == 1 && stat_of(&w, "wall_ms") > 1000,
        "waiter: %s", w.out);
  printf("lease renewed: the waiter got the holder's entry after %.0f ms\n", stat_of(&w, "wall_ms"));
  proc_free(&holder);
  proc_free(&w);
}

static void lease_wait_bound(void) {
  const char *env[] = {"CKJIT_REMOTE_CACHE_WAIT_MS=300", NULL};
  const char *spec[] = {SPECS[2], NULL};
  const char *slow[] = {"--slow-ms", "30000", NULL};
  proc holder, w;
  helper_start(&holder, work_dir("bound-holder"), g_srv.url, env, slow, spec);
  CHECK(proc_wait_for(&holder, "compiling", 30000), "the holder never compiled");
  helper_run(&w, work_dir("bound-waiter"), g_srv.url, env, NULL, spec, 0);
  const double waited = call_num(&w, 0, "remote_ms");
  printf("wait bound 300 ms: the waiter spent %.0f ms on the remote, then compiled\n", waited);
  CHECK(stat_of(&w, "compiles") == 1 && stat_of(&w, "remote_lease_waits") == 1 && waited >= 280 &&
            waited < 1300,
        "waiter: %s", w.out);
  kill(holder.pid, SIGKILL);
  proc_wait(&holder, 10000);
  proc_free(&holder);
  proc_free(&w);
}

void case_lease(void) {
  start_server(0, NULL);
  lease_crash();
  lease_renewed();
  lease_wait_bound();
}

/* ---- fleet ------------------------------------------------------------------ */
void case_fleet(void) {
  start_server(0, NULL);
  enum { PROCS = 4 };
  const char *specs[] = {SPECS[0], SPECS[1], SPECS[2], SPECS[3], SPECS[4], SPECS[5], SPECS[6],
                         SPECS[7], NULL};
  const char *threads[] = {"--threads", "2", NULL};
  proc p[PROCS];
  const char *dirs[PROCS];
  for (int i = 0; i < PROCS; i++) {
    char tag[16];
    tu_fmt(tag, sizeof tag, "fleet%d", i);
    dirs[i] = work_dir(tag);
    helper_start(&p[i], dirs[i], g_srv.url, NULL, threads, specs);
  }
  double compiles = 0, rejects = 0, hits = 0;
  for (int i = 0; i < PROCS; i++) {
    proc_wait(&p[i], 120000);
    CHECK(p[i].status == 0, "process %d: exit %d\n%s\n%s", i, p[i].status, p[i].out, p[i].err);
    compiles += stat_of(&p[i], "compiles");
    rejects += stat_of(&p[i], "remote_rejects");
    hits += stat_of(&p[i], "remote_hits");
  }
  printf("fleet: %d processes x 2 threads x 8 specs: %.0f compiles, %.0f remote hits\n", PROCS,
         compiles, hits);
  CHECK(compiles == 8 && rejects == 0, "one compile per spec expected, got %.0f", compiles);
  for (int i = 0; i < PROCS; i++) {
    verify_cache(dirs[i]);
    CHECK(tu_path_exists(dirs[i]), "cache");
    proc_free(&p[i]);
  }
  const char *dbsize[] = {"DBSIZE", NULL};
  CHECK(rs_int(&g_srv, dbsize) == 8, "8 entries and no lease left in Redis");
}

/* ---- tools ------------------------------------------------------------------ */
void case_tools(void) {
  start_server(0, NULL);
  const char *t1 = work_dir("t1"), *t2 = work_dir("t2"), *t3 = work_dir("t3");
  proc p;
  const char *prewarm[] = {g_prewarm_tool, "--remote", g_srv.url, "--cache-dir", t1, "--arch",
                           g_arch, "-q", SPECS[0], SPECS[6], NULL};
  tool_run_env(&p, prewarm, NULL);
  CHECK(p.status == 0, "prewarm --remote: %s%s", p.out, p.err);
  proc_free(&p);
  const char *dbsize[] = {"DBSIZE", NULL};
  CHECK(rs_int(&g_srv, dbsize) == 2, "prewarm --remote stored 2 entries");

  const char *info[] = {g_cache_tool, "--json", "info", "--remote", g_srv.url, NULL};
  tool_run_env(&p, info, NULL);
  CHECK(p.status == 0 && strstr(p.out, "\"entries\": 2"), "info --remote: %s%s", p.out, p.err);
  proc_free(&p);

  const char *pull[] = {g_cache_tool, "--json", "--cache-dir", t2, "pull", "--remote", g_srv.url,
                        NULL};
  tool_run_env(&p, pull, NULL);
  CHECK(p.status == 0 && strstr(p.out, "\"pulled\": 2"), "pull: %s%s", p.out, p.err);
  proc_free(&p);
  verify_cache(t2);

  /* A bad value is reported and not stored. */
  char hex[40] = "", name[CKJIT_REMOTE_NAME_MAX];
  const char *argv_ls[] = {g_cache_tool, "--json", "--cache-dir", t1, "ls", NULL};
  tool_run_env(&p, argv_ls, NULL);
  const char *k = strstr(p.out, "\"key\": \"");
  CHECK(k, "ls: %s", p.out);
  tu_fmt(hex, sizeof hex, "%.32s", k + 8);
  proc_free(&p);
  entry_name(hex, name, sizeof name);
  size_t len;
  uint8_t *good = rs_get(&g_srv, name, &len);
  CHECK(good && rs_set(&g_srv, name, good, len - 1) == 0, "truncating %s", name);
  const char *pull3[] = {g_cache_tool, "--json", "--cache-dir", t3, "pull", "--remote", g_srv.url,
                         NULL};
  tool_run_env(&p, pull3, NULL);
  char path[1200];
  entry_file(t3, hex, path, sizeof path);
  CHECK(p.status == 1 && strstr(p.out, "\"bad\": 1") && strstr(p.out, "\"pulled\": 1") &&
            !tu_path_exists(path),
        "pull of a bad value: %s%s", p.out, p.err);
  proc_free(&p);

  /* push restores it from the verified local entry. */
  const char *push[] = {g_cache_tool, "--json", "--cache-dir", t1, "push", "--remote", g_srv.url,
                        NULL};
  tool_run_env(&p, push, NULL);
  CHECK(p.status == 0 && strstr(p.out, "\"pushed\": 2"), "push: %s%s", p.out, p.err);
  proc_free(&p);
  size_t len2;
  uint8_t *back = rs_get(&g_srv, name, &len2);
  CHECK(back && len2 == len && !memcmp(back, good, len), "push did not restore %s", name);
  free(back);

  /* A damaged local entry is not pushed. */
  entry_file(t1, hex, path, sizeof path);
  size_t flen;
  uint8_t *f = tu_read_file(path, &flen);
  f[flen - 32] ^= 0x40;
  CHECK(tu_write_file(path, f, flen) == 0, "tampering");
  free(f);
  tool_run_env(&p, push, NULL);
  CHECK(p.status == 1 && strstr(p.out, "\"bad\": 1") && strstr(p.out, "\"pushed\": 1"),
        "push of a bad entry: %s%s", p.out, p.err);
  proc_free(&p);
  back = rs_get(&g_srv, name, &len2);
  CHECK(back && len2 == len && !memcmp(back, good, len), "a bad entry was pushed");
  free(back);
  free(good);

  /* Usage: a bad URL (redacted), no --remote, the help. */
  const char *bad_url[] = {g_cache_tool, "info", "--remote", "redis://u:hunter2@host:port", NULL};
  tool_run_env(&p, bad_url, NULL);
  CHECK(p.status == 2 && !strstr(p.err, "hunter2") && strstr(p.err, "u:***@"), "bad URL: %s",
        p.err);
  proc_free(&p);
  const char *no_remote[] = {g_cache_tool, "--cache-dir", t1, "push", NULL};
  tool_run_env(&p, no_remote, NULL);
  CHECK(p.status == 2 && strstr(p.err, "--remote"), "push without --remote: %s", p.err);
  proc_free(&p);
  const char *help[] = {g_cache_tool, "pull", "--help", NULL};
  tool_run_env(&p, help, NULL);
  CHECK(p.status == 0 && strstr(p.out, "--remote URL"), "pull --help: %s", p.out);
  proc_free(&p);
  const char *phelp[] = {g_prewarm_tool, "--help", NULL};
  tool_run_env(&p, phelp, NULL);
  CHECK(p.status == 0 && strstr(p.out, "--remote URL"), "prewarm --help: %s", p.out);
  proc_free(&p);
  const char *down[] = {g_prewarm_tool, "--remote", "redis://127.0.0.1:1", "--cache-dir", t3,
                        "--arch", g_arch, SPECS[0], NULL};
  tool_run_env(&p, down, NULL);
  CHECK(p.status == 1 && strstr(p.err, "cannot use the remote cache"), "prewarm, no server: %s",
        p.err);
  proc_free(&p);
}
