/* The one file writer (see atomic_file.h): whole files through a temporary
 * file and rename(), records through one O_APPEND write. */
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/error.h"

#ifndef PIPE_BUF
#define PIPE_BUF 4096
#endif
#ifndef NAME_MAX
#define NAME_MAX 255
#endif

static int write_all(int fd, const unsigned char *buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, buf + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return -1;
    }
    done += (size_t)n;
  }
  return 0;
}

static int set_error(ckjit_file_error *e, const char *step, int err) {
  if (e) {
    e->step = step;
    e->err = err;
  }
  return err;
}

/* `tmp` to `name` in `dir_fd` unless `name` exists (EEXIST): renameat2's
 * RENAME_NOREPLACE; on a file system without it, a hard link (which fails
 * on an existing name too) and the temporary name removed.  0 or an errno. */
static int rename_no_replace(int dir_fd, const char *tmp, const char *name) {
  if (renameat2(dir_fd, tmp, dir_fd, name, RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  if (linkat(dir_fd, tmp, dir_fd, name, 0) != 0) return errno;
  unlinkat(dir_fd, tmp, 0);
  return 0;
}

int ckjit__file_write_at(int dir_fd, const char *dir_path, const char *name, const char *tmp_name,
                         const void *buf, size_t size, unsigned mode, unsigned flags,
                         ckjit_file_hook hook, ckjit_file_error *e) {
  char tmp_path[PATH_MAX + 256];
  const char *hook_path = tmp_name;
  if (hook && dir_path) {
    snprintf(tmp_path, sizeof tmp_path, "%s/%s", dir_path, tmp_name);
    hook_path = tmp_path;
  }
  set_error(e, NULL, 0);
  const unsigned char *bytes = buf;
  int err = hook ? hook("open-temp", hook_path) : 0;
  int fd = -1;
  if (!err &&
      (fd = openat(dir_fd, tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                   (mode_t)mode)) < 0)
    err = errno;
  if (err) return set_error(e, "create a temporary file for", err);
  /* Two halves, so that a hook can stop a write in the middle (a crash
   * there leaves a partial temporary file, never a partial target). */
  size_t half = size / 2;
  if (write_all(fd, bytes, half)) err = errno;
  if (!err && hook) err = hook("write", hook_path);
  if (!err && write_all(fd, bytes + half, size - half)) err = errno;
  if (!err && (flags & CKJIT_FILE_SYNC) && !(err = hook ? hook("fsync", hook_path) : 0) &&
      fsync(fd))
    err = errno;
  if (close(fd) && !err) err = errno;
  if (!err && !(err = hook ? hook("rename", hook_path) : 0))
    err = (flags & CKJIT_FILE_NO_REPLACE) ? rename_no_replace(dir_fd, tmp_name, name)
                                          : renameat(dir_fd, tmp_name, dir_fd, name) ? errno : 0;
  if (err) {
    unlinkat(dir_fd, tmp_name, 0);
    return set_error(e, "write", err);
  }
  return 0;
}

/* The temporary file next to `path`: ".<name>.tmp-<pid>-<thread>-<n>" (a
 * shorter name when that would pass NAME_MAX).  0, or an errno. */
static int temp_path_for(const char *path, char *tmp, size_t tmp_size) {
  static _Atomic unsigned counter;
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t dir_len = (size_t)(base - path);
  char name[NAME_MAX + 1];
  if (!*base) return EISDIR; /* "dir/": no file name */
  unsigned n = atomic_fetch_add(&counter, 1);
  int len = snprintf(name, sizeof name, ".%s.tmp-%ld-%lx-%u", base, (long)getpid(),
                     (unsigned long)pthread_self(), n);
  if (len < 0 || (size_t)len >= sizeof name)
    snprintf(name, sizeof name, ".ckjit.tmp-%ld-%lx-%u", (long)getpid(),
             (unsigned long)pthread_self(), n);
  if (dir_len + strlen(name) >= tmp_size) return ENAMETOOLONG;
  snprintf(tmp, tmp_size, "%.*s%s", (int)dir_len, path, name);
  return 0;
}

ckjit_status ckjit__file_write(const char *path, const void *buf, size_t size, unsigned mode,
                               unsigned flags, ckjit_file_error *e) {
  ckjit_file_error local;
  if (!e) e = &local;
  char tmp[PATH_MAX + 1];
  int err = temp_path_for(path, tmp, sizeof tmp);
  if (err) set_error(e, "create a temporary file for", err);
  else err = ckjit__file_write_at(AT_FDCWD, NULL, path, tmp, buf, size, mode, flags, NULL, e);
  if (!err) return CKJIT_SUCCESS;
  return ckjit__fail(CKJIT_ERROR_CACHE, "cannot %s %s: %s", e->step, path, strerror(err));
}

ckjit_status ckjit__file_stream_open(ckjit_file_stream *s, const char *path, unsigned mode) {
  memset(s, 0, sizeof *s);
  int err = 0, fd = -1;
  if (strlen(path) >= sizeof s->path) err = ENAMETOOLONG;
  else err = temp_path_for(path, s->tmp, sizeof s->tmp);
  if (!err) {
    snprintf(s->path, sizeof s->path, "%s", path);
    fd = open(s->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
    if (fd < 0) err = errno;
  }
  if (!err && !(s->file = fdopen(fd, "wb"))) {
    err = errno;
    close(fd);
    unlink(s->tmp);
  }
  if (!err) return CKJIT_SUCCESS;
  return ckjit__fail(CKJIT_ERROR_CACHE, "cannot create a temporary file for %s: %s", path,
                     strerror(err));
}

ckjit_status ckjit__file_stream_commit(ckjit_file_stream *s, unsigned flags) {
  int err = ferror(s->file) ? EIO : 0;
  if (fflush(s->file) && !err) err = errno;
  if (!err && (flags & CKJIT_FILE_SYNC) && fsync(fileno(s->file))) err = errno;
  if (fclose(s->file) && !err) err = errno;
  s->file = NULL;
  if (!err && rename(s->tmp, s->path)) err = errno;
  if (!err) return CKJIT_SUCCESS;
  unlink(s->tmp);
  return ckjit__fail(CKJIT_ERROR_CACHE, "cannot write %s: %s", s->path, strerror(err));
}

void ckjit__file_stream_abort(ckjit_file_stream *s) {
  if (!s->file) return;
  fclose(s->file);
  s->file = NULL;
  unlink(s->tmp);
}

ckjit_status ckjit__file_append(const char *path, const void *buf, size_t len, unsigned mode,
                                unsigned flags, ckjit_file_error *e) {
  ckjit_file_error local;
  if (!e) e = &local;
  set_error(e, NULL, 0);
  const int new_line = (flags & CKJIT_FILE_NEW_LINE) != 0;
  if (len + (size_t)new_line > PIPE_BUF) {
    set_error(e, "append to", EINVAL);
    return ckjit__fail(CKJIT_ERROR_CACHE,
                       "cannot append to %s: a record of %zu bytes%s is longer than PIPE_BUF "
                       "(%d bytes), so it could interleave with other appenders",
                       path, len, new_line ? " (and a newline)" : "", (int)PIPE_BUF);
  }
  int fd = open(path, (new_line ? O_RDWR : O_WRONLY) | O_APPEND | O_CREAT | O_CLOEXEC,
                (mode_t)mode);
  if (fd < 0) {
    int err = errno;
    set_error(e, "open", err);
    return ckjit__fail(CKJIT_ERROR_CACHE, "cannot open %s: %s", path, strerror(err));
  }
  char line[PIPE_BUF];
  const char *out = buf;
  size_t n = len;
  if (new_line) {
    /* After a torn last line (a crash mid-write), start on a new line.  An
     * empty file, or one that cannot be read, needs none. */
    char last = '\n';
    if (lseek(fd, -1, SEEK_END) >= 0 && read(fd, &last, 1) != 1) last = '\n';
    if (last != '\n') {
      line[0] = '\n';
      memcpy(line + 1, buf, len);
      out = line;
      n = len + 1;
    }
  }
  /* One write of the whole record: with O_APPEND, concurrent appenders never
   * interleave inside it.  A partial write is not retried (the rest would no
   * longer be atomic). */
  ssize_t w;
  do w = write(fd, out, n);
  while (w < 0 && errno == EINTR);
  int err = w < 0 ? errno : 0;
  if (close(fd) != 0 && w == (ssize_t)n) {
    err = errno;
    w = -1;
  }
  if (w == (ssize_t)n) return CKJIT_SUCCESS;
  set_error(e, "write", err);
  if (err) return ckjit__fail(CKJIT_ERROR_CACHE, "cannot write %s: %s", path, strerror(err));
  return ckjit__fail(CKJIT_ERROR_CACHE, "cannot write %s: short write (%zd of %zu bytes)", path,
                     w, n);
}

int ckjit__file_make_dir(const char *path, unsigned mode, int parents) {
  if (!*path) {
    errno = ENOENT;
    return -1;
  }
  if (parents) {
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) {
      errno = ENAMETOOLONG;
      return -1;
    }
    for (char *s = p + 1; *s; s++) {
      if (*s != '/') continue;
      *s = '\0';
      if (mkdir(p, (mode_t)mode) && errno != EEXIST) return -1;
      *s = '/';
    }
  }
  if (mkdir(path, (mode_t)mode) && errno != EEXIST) return -1;
  return 0;
}
