/* Prewarm worker processes: both ends of the job/result protocol (see
 * worker_pool.h). */
#include "worker_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "ckjit/ckjit.h"
#include "wall_clock.h"

#define JOB_MAGIC 0x4a4a4b43u    /* "CKJJ" */
#define RESULT_MAGIC 0x524a4b43u /* "CKJR" */
#define TICK_MS 250
#define REAP_GRACE_MS 2000

typedef struct pool_job_msg {
  uint32_t magic;
  uint32_t reserved;
  uint64_t index;
  char arch[POOL_ARCH_MAX];
  char spec[POOL_SPEC_MAX];
} pool_job_msg;

typedef struct pool_result_msg {
  uint32_t magic;
  uint32_t reserved;
  uint64_t index;
  prewarm_result result;
} pool_result_msg;

/* ---- I/O helpers --------------------------------------------------------- */

/* Reads exactly n bytes (blocking).  Returns n, 0 at a clean EOF before the
 * first byte, -1 on an error or an EOF inside the message. */
static ssize_t read_full(int fd, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return got == 0 ? 0 : -1;
    got += (size_t)r;
  }
  return (ssize_t)n;
}

static int write_full(int fd, const void *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, (const char *)buf + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    done += (size_t)w;
  }
  return 0;
}

static void copy_text(char *dst, size_t len, const char *src) {
  size_t n = strlen(src);
  if (n >= len) n = len - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

/* ---- the worker ---------------------------------------------------------- */

static void test_hooks(const char *spec) {
  const char *crash = getenv("CKJIT_PREWARM_TEST_CRASH");
  if (crash && *crash && strstr(spec, crash)) {
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
    _exit(99); /* not reached */
  }
  const char *hang = getenv("CKJIT_PREWARM_TEST_HANG");
  if (hang && *hang && strstr(spec, hang))
    for (;;) pause();
}

int prewarm_worker_main(const char *cache_dir) {
  /* Results go to the original stdout; anything else printed to stdout (by
   * a compiler library, say) goes to stderr instead. */
  int out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (out < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    fprintf(stderr, "ckjit-prewarm worker: cannot set up its output: %s\n", strerror(errno));
    return 3;
  }
  /* Workers only compile: keep each from opening a GPU (a context per
   * worker would cost device memory and start-up time). */
  setenv("CUDA_VISIBLE_DEVICES", "-1", 1);
  setenv("HIP_VISIBLE_DEVICES", "-1", 1);
  unsetenv("CKJIT_DEVICE"); /* an ordinal means nothing without devices */

  ckjit_options opts;
  ckjit_options_init(&opts);
  opts.cache_dir = cache_dir;
  opts.disk_cache = 1;
  ckjit_status init_status = ckjit_init(&opts);
  char init_error[1024] = "";
  if (init_status != CKJIT_SUCCESS) copy_text(init_error, sizeof init_error, ckjit_last_error());

  pool_job_msg job;
  pool_result_msg *res = malloc(sizeof *res);
  if (!res) return 3;
  int rc = 0;
  for (;;) {
    ssize_t n = read_full(STDIN_FILENO, &job, sizeof job);
    if (n == 0) break; /* the parent is done */
    if (n < 0 || job.magic != JOB_MAGIC) {
      fprintf(stderr, "ckjit-prewarm worker: malformed job message\n");
      rc = 3;
      break;
    }
    job.arch[sizeof job.arch - 1] = '\0';
    job.spec[sizeof job.spec - 1] = '\0';
    test_hooks(job.spec);
    memset(res, 0, sizeof *res);
    res->magic = RESULT_MAGIC;
    res->index = job.index;
    if (init_status != CKJIT_SUCCESS) {
      res->result.status = (int)init_status;
      snprintf(res->result.error, sizeof res->result.error, "ckjit_init failed in the worker: %s",
               init_error);
    } else {
      prewarm_job pj = {job.spec, job.arch, NULL, NULL};
      prewarm_run_job(&pj, &res->result);
    }
    if (write_full(out, res, sizeof *res) != 0) {
      rc = 3; /* the parent is gone */
      break;
    }
  }
  free(res);
  ckjit_shutdown();
  return rc;
}

char *pool_self_exe(const char *argv0) {
#ifdef __linux__
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = '\0';
    /* A replaced binary reads "... (deleted)": still runnable through /proc. */
    if (access(buf, X_OK) == 0) return strdup(buf);
    return strdup("/proc/self/exe");
  }
#endif
  return argv0 ? strdup(argv0) : NULL;
}

/* ---- the parent ---------------------------------------------------------- */

typedef struct slot {
  pid_t pid;       /* 0: no process */
  int job_fd;      /* write end of the worker's stdin */
  int res_fd;      /* read end of the worker's stdout (non-blocking) */
  long job;        /* index of the job it runs, -1 when idle */
  double started;  /* ms, when the job was handed out */
  size_t got;      /* bytes of `msg` received */
  pool_result_msg msg;
} slot;

typedef struct pool {
  const prewarm_plan *plan;
  const pool_options *opt;
  prewarm_on_result on_result;
  void *ctx;
  pool_stats *stats;
  slot *slots;
  size_t n_slots;
  size_t live;
  size_t lost; /* workers lost and not yet replaced */
  size_t done;
  prewarm_result scratch; /* for failures the parent reports */
} pool;

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* Starts a worker in `s`.  Returns 0, or -1 with the reason in err. */
static int spawn(pool *p, slot *s, char *err, size_t err_len) {
  int jp[2] = {-1, -1}, rp[2] = {-1, -1}, ep[2] = {-1, -1};
  if (pipe2(jp, O_CLOEXEC) || pipe2(rp, O_CLOEXEC) || pipe2(ep, O_CLOEXEC)) {
    snprintf(err, err_len, "cannot create a pipe for a worker: %s", strerror(errno));
    goto fail;
  }
  char *argv[5] = {(char *)p->opt->exe, (char *)POOL_WORKER_FLAG, NULL, NULL, NULL};
  if (p->opt->cache_dir) {
    argv[2] = (char *)"--cache-dir";
    argv[3] = (char *)p->opt->cache_dir;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, err_len, "cannot start a worker process (fork): %s", strerror(errno));
    goto fail;
  }
  if (pid == 0) {
    /* The child: async-signal-safe calls only until exec. */
    if (dup2(jp[0], STDIN_FILENO) < 0 || dup2(rp[1], STDOUT_FILENO) < 0) {
      int e = errno;
      (void)!write(ep[1], &e, sizeof e);
      _exit(127);
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, NULL); /* the parent ignores it; exec keeps that */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
#else
    (void)parent;
#endif
    execv(argv[0], argv);
    int e = errno;
    (void)!write(ep[1], &e, sizeof e);
    _exit(127);
  }
  close_fd(&jp[0]);
  close_fd(&rp[1]);
  close_fd(&ep[1]);
  /* Exec closes ep[1] (close-on-exec): EOF means the worker is running. */
  int child_errno = 0;
  ssize_t n;
  do n = read(ep[0], &child_errno, sizeof child_errno);
  while (n < 0 && errno == EINTR);
  close_fd(&ep[0]);
  if (n > 0) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    snprintf(err, err_len, "cannot start a worker process (%s %s): %s", p->opt->exe,
             POOL_WORKER_FLAG, strerror(child_errno));
    goto fail;
  }
  fcntl(rp[0], F_SETFL, fcntl(rp[0], F_GETFL) | O_NONBLOCK);
  s->pid = pid;
  s->job_fd = jp[1];
  s->res_fd = rp[0];
  s->job = -1;
  s->got = 0;
  p->live++;
  p->stats->started++;
  if (p->lost) {
    p->lost--;
    p->stats->replaced++;
  }
  if (p->live > p->stats->max_live) p->stats->max_live = p->live;
  return 0;
fail:
  for (int i = 0; i < 2; i++) {
    close_fd(&jp[i]);
    close_fd(&rp[i]);
    close_fd(&ep[i]);
  }
  return -1;
}

/* Waits for the worker of `s` to exit (killing it after a grace period),
 * closes its pipes and returns its wait status. */
static int reap(pool *p, slot *s, int kill_now) {
  int status = 0;
  close_fd(&s->job_fd);
  close_fd(&s->res_fd);
  if (kill_now) kill(s->pid, SIGKILL);
  double deadline = wall_clock_ms() + REAP_GRACE_MS;
  for (;;) {
    pid_t r = waitpid(s->pid, &status, WNOHANG);
    if (r == s->pid) break;
    if (r < 0 && errno != EINTR) break;
    if (wall_clock_ms() > deadline) {
      kill(s->pid, SIGKILL);
      while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  s->pid = 0;
  s->job = -1;
  s->got = 0;
  p->live--;
  return status;
}

/* Reports job `index` as failed with a message built by the caller. */
static void fail_job(pool *p, size_t index, double ms, int sig, int timed_out, const char *fmt,
                     ...) __attribute__((format(printf, 6, 7)));
static void fail_job(pool *p, size_t index, double ms, int sig, int timed_out, const char *fmt,
                     ...) {
  prewarm_result *r = &p->scratch;
  memset(r, 0, sizeof *r);
  r->status = (int)CKJIT_ERROR_COMPILE;
  r->ms = ms;
  r->signal = sig;
  r->timed_out = timed_out;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->error, sizeof r->error, fmt, ap);
  va_end(ap);
  p->done++;
  p->on_result(p->ctx, index, r);
}

/* The worker of `s` is gone (EOF on its results) or misbehaved: reap it and
 * fail the job it was running. */
static void worker_lost(pool *p, slot *s, const char *why) {
  size_t index = (size_t)s->job;
  double ms = wall_clock_ms() - s->started;
  pid_t pid = s->pid;
  int status = reap(p, s, why != NULL);
  const prewarm_job *j = &p->plan->jobs[index];
  if (why) {
    fail_job(p, index, ms, 0, 0, "worker process %d %s while compiling %s for %s", (int)pid, why,
             j->spec, j->arch);
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    fail_job(p, index, ms, sig, 0,
             "the worker process %d compiling %s for %s was killed by signal %d (%s)%s; "
             "the compiler crashed or was killed",
             (int)pid, j->spec, j->arch, sig, strsignal(sig),
#ifdef WCOREDUMP
             WCOREDUMP(status) ? ", core dumped" : ""
#else
             ""
#endif
    );
  } else {
    fail_job(p, index, ms, 0, 0,
             "the worker process %d compiling %s for %s exited with status %d before reporting "
             "a result",
             (int)pid, j->spec, j->arch, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  p->lost++;
}

/* Hands job `index` to the idle worker of `s`.  Returns 0, or -1 when the
 * worker is gone (it is reaped; the job was not consumed). */
static int hand_out(pool *p, slot *s, size_t index) {
  pool_job_msg m;
  memset(&m, 0, sizeof m);
  m.magic = JOB_MAGIC;
  m.index = index;
  copy_text(m.arch, sizeof m.arch, p->plan->jobs[index].arch);
  copy_text(m.spec, sizeof m.spec, prewarm_job_spec(&p->plan->jobs[index]));
  if (write_full(s->job_fd, &m, sizeof m) != 0) {
    reap(p, s, 1);
    p->lost++;
    return -1;
  }
  s->job = (long)index;
  s->started = wall_clock_ms();
  s->got = 0;
  return 0;
}

/* Reads what the worker of `s` has sent. */
static void receive(pool *p, slot *s) {
  for (;;) {
    ssize_t r = read(s->res_fd, (char *)&s->msg + s->got, sizeof s->msg - s->got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return; /* EAGAIN: more later */
    if (r == 0) {
      worker_lost(p, s, NULL);
      return;
    }
    s->got += (size_t)r;
    if (s->got < sizeof s->msg) continue;
    if (s->msg.magic != RESULT_MAGIC || s->msg.index != (uint64_t)s->job) {
      worker_lost(p, s, "sent a malformed result");
      return;
    }
    prewarm_result *res = &s->msg.result;
    res->key[sizeof res->key - 1] = '\0';
    res->kernel[sizeof res->kernel - 1] = '\0';
    res->error[sizeof res->error - 1] = '\0';
    size_t index = (size_t)s->job;
    s->job = -1;
    s->got = 0;
    p->done++;
    p->on_result(p->ctx, index, res);
    return;
  }
}

int prewarm_pool_run(const prewarm_plan *plan, const pool_options *opt, prewarm_on_result on_result,
                     void *ctx, pool_stats *stats) {
  pool_stats dummy;
  if (!stats) stats = &dummy;
  memset(stats, 0, sizeof *stats);
  if (plan->count == 0) return 0;
  pool p;
  memset(&p, 0, sizeof p);
  p.plan = plan;
  p.opt = opt;
  p.on_result = on_result;
  p.ctx = ctx;
  p.stats = stats;
  p.n_slots = opt->workers < 1 ? 1 : (size_t)opt->workers;
  if (p.n_slots > plan->count) p.n_slots = plan->count;
  p.slots = calloc(p.n_slots, sizeof *p.slots);
  struct pollfd *fds = calloc(p.n_slots, sizeof *fds);
  size_t *fd_slot = calloc(p.n_slots, sizeof *fd_slot);
  if (!p.slots || !fds || !fd_slot) {
    free(p.slots);
    free(fds);
    free(fd_slot);
    for (size_t i = 0; i < plan->count; i++)
      fail_job(&p, i, 0, 0, 0, "out of memory starting the workers");
    return -1;
  }
  for (size_t i = 0; i < p.n_slots; i++) {
    p.slots[i].job_fd = p.slots[i].res_fd = -1;
    p.slots[i].job = -1;
  }
  /* A worker that dies makes writes to its pipe fail with EPIPE instead of
   * killing us. */
  struct sigaction ign, old_pipe;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, &old_pipe);

  int rc = 0;
  size_t next = 0, spawn_failures = 0;
  double last_tick = wall_clock_ms();
  char err[512];
  while (p.done < plan->count) {
    /* Start workers and hand out jobs. */
    for (size_t i = 0; i < p.n_slots && next < plan->count; i++) {
      slot *s = &p.slots[i];
      if (s->pid && s->job >= 0) continue;
      if (!s->pid && spawn(&p, s, err, sizeof err) != 0) {
        /* Without a single live worker nothing would ever run: fail the rest. */
        if (p.live == 0 && ++spawn_failures >= 3) {
          rc = -1;
          while (next < plan->count) fail_job(&p, next++, 0, 0, 0, "%s", err);
        }
        break;
      }
      spawn_failures = 0;
      if (hand_out(&p, s, next) == 0) next++;
    }
    if (p.done >= plan->count) break;

    /* Wait for results, a time limit or a tick. */
    size_t nfds = 0;
    double now = wall_clock_ms(), wait_ms = -1;
    for (size_t i = 0; i < p.n_slots; i++) {
      slot *s = &p.slots[i];
      if (!s->pid || s->job < 0) continue;
      fds[nfds].fd = s->res_fd;
      fds[nfds].events = POLLIN;
      fds[nfds].revents = 0;
      fd_slot[nfds++] = i;
      if (opt->timeout_s > 0) {
        double left = s->started + opt->timeout_s * 1e3 - now;
        if (left < 0) left = 0;
        if (wait_ms < 0 || left < wait_ms) wait_ms = left;
      }
    }
    if (opt->on_tick && (wait_ms < 0 || wait_ms > TICK_MS)) wait_ms = TICK_MS;
    if (nfds == 0 && wait_ms < 0) wait_ms = 10; /* only while a worker is being replaced */
    int n = poll(fds, nfds, wait_ms < 0 ? -1 : (int)(wait_ms + 1));
    if (n < 0 && errno != EINTR) {
      /* Cannot wait: give up on what is running. */
      for (size_t i = 0; i < p.n_slots; i++)
        if (p.slots[i].pid && p.slots[i].job >= 0) worker_lost(&p, &p.slots[i], "could not be polled");
      continue;
    }
    for (size_t k = 0; n > 0 && k < nfds; k++)
      if (fds[k].revents) receive(&p, &p.slots[fd_slot[k]]);

    now = wall_clock_ms();
    if (opt->timeout_s > 0) {
      for (size_t i = 0; i < p.n_slots; i++) {
        slot *s = &p.slots[i];
        if (!s->pid || s->job < 0 || now - s->started < opt->timeout_s * 1e3) continue;
        size_t index = (size_t)s->job;
        double ms = now - s->started;
        pid_t pid = s->pid;
        reap(&p, s, 1);
        p.lost++;
        const prewarm_job *j = &plan->jobs[index];
        fail_job(&p, index, ms, 0, 1,
                 "timed out: compiling %s for %s took longer than %g s (--timeout); the worker "
                 "process %d was killed",
                 j->spec, j->arch, opt->timeout_s, (int)pid);
      }
    }
    if (opt->on_tick && now - last_tick >= TICK_MS) {
      last_tick = now;
      opt->on_tick(ctx);
    }
  }
  /* Closing a worker's stdin tells it to exit. */
  for (size_t i = 0; i < p.n_slots; i++) close_fd(&p.slots[i].job_fd);
  for (size_t i = 0; i < p.n_slots; i++)
    if (p.slots[i].pid) reap(&p, &p.slots[i], 0);
  sigaction(SIGPIPE, &old_pipe, NULL);
  free(p.slots);
  free(fds);
  free(fd_slot);
  return rc;
}
