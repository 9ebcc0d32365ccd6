/* The acceptance rule of cache entries (see entry_accept.h). */
#include "entry_accept.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "disk_cache.h"
#include "payload_check.h"

static int trusted(uid_t uid, uid_t root_owner) {
  return uid == root_owner || uid == 0 || uid == geteuid();
}

/* Type, owner and mode: the part of the rule a subdirectory and an entry
 * file share (their messages differ only by naming the subdirectory). */
static ckjit_refusal node_check(const struct stat *st, uid_t root_owner, int is_subdir,
                                const char **why) {
  if (S_ISLNK(st->st_mode)) {
    *why = is_subdir ? "subdirectory is a symbolic link (never followed)"
                     : "symbolic link (never followed)";
    return CKJIT_REFUSAL_TYPE;
  }
  if (is_subdir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode)) {
    *why = is_subdir ? "subdirectory is not a directory"
           : S_ISDIR(st->st_mode) ? "a directory, not a regular file"
                                  : "not a regular file";
    return CKJIT_REFUSAL_TYPE;
  }
  if (!trusted(st->st_uid, root_owner)) {
    *why = is_subdir ? "subdirectory owned by another user than the cache directory's"
                     : "owned by another user than the cache directory's";
    return CKJIT_REFUSAL_OWNER;
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    *why = is_subdir ? "subdirectory writable by group or others" : "writable by group or others";
    return CKJIT_REFUSAL_MODE;
  }
  return CKJIT_REFUSAL_NONE;
}

ckjit_refusal ckjit__subdir_check(const struct stat *st, uid_t root_owner, const char **why) {
  return node_check(st, root_owner, 1, why);
}

ckjit_refusal ckjit__entry_file_check(const struct stat *st, uid_t root_owner, const char **why) {
  ckjit_refusal r = node_check(st, root_owner, 0, why);
  if (r) return r;
  if ((uint64_t)st->st_size > CKJIT_ENTRY_MAX_FILE) {
    *why = "file too large for an entry";
    return CKJIT_REFUSAL_CONTENT;
  }
  return CKJIT_REFUSAL_NONE;
}

int ckjit__entry_accept_bytes(const uint8_t *buf, size_t size, const ckjit_key *expect,
                              ckjit_entry_meta *meta, const uint8_t **payload,
                              size_t *payload_size, const char **why) {
  ckjit_entry_meta m;
  const uint8_t *p;
  size_t n;
  const char *bad = NULL;
  if (ckjit__entry_decode(buf, size, expect, &m, &p, &n, &bad) != 0) {
    *why = bad ? bad : "does not decode";
    return -1;
  }
  if (ckjit__entry_accept_payload(&m, p, n, &bad) != 0) {
    *why = bad;
    return -1;
  }
  if (meta) *meta = m;
  if (payload) *payload = p;
  if (payload_size) *payload_size = n;
  return 0;
}

static int read_all(int fd, uint8_t *buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, buf + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : -1;
    done += (size_t)n;
  }
  return 0;
}

int ckjit__entry_read_at(int dir_fd, const char *name, const ckjit_key *expect, uid_t root_owner,
                         int touch, ckjit_entry_read *out) {
  static _Thread_local char reason[160];
  memset(out, 0, sizeof *out);
  /* O_NONBLOCK: a FIFO planted at the entry's name must not block the open. */
  int fd = openat(dir_fd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    out->refusal = errno == ELOOP ? CKJIT_REFUSAL_TYPE : CKJIT_REFUSAL_CONTENT;
    snprintf(reason, sizeof reason, "cannot open: %s", strerror(errno));
    out->why = errno == ELOOP ? "symbolic link (never followed)" : reason;
    return -1;
  }
  const char *why = NULL;
  uint8_t *buf = NULL;
  if (fstat(fd, &out->st) != 0) {
    out->refusal = CKJIT_REFUSAL_CONTENT;
    why = "cannot stat";
  } else {
    out->opened = 1;
    out->refusal = ckjit__entry_file_check(&out->st, root_owner, &why);
  }
  size_t size = out->opened ? (size_t)out->st.st_size : 0;
  if (!out->refusal && !(buf = malloc(size ? size : 1))) {
    out->refusal = CKJIT_REFUSAL_CONTENT;
    why = "out of memory reading it";
  }
  if (!out->refusal) {
    int err = read_all(fd, buf, size);
    if (err) {
      out->refusal = CKJIT_REFUSAL_CONTENT;
      if (err > 0) snprintf(reason, sizeof reason, "read failed: %s", strerror(err));
      why = err > 0 ? reason : "file shrank while being read";
    }
  }
  const uint8_t *payload;
  if (!out->refusal &&
      ckjit__entry_accept_bytes(buf, size, expect, &out->meta, &payload, &out->payload_size,
                                &why) != 0)
    out->refusal = CKJIT_REFUSAL_CONTENT;
  if (out->refusal) {
    close(fd);
    free(buf);
    out->why = why;
    return -1;
  }
  /* The mtime is the entry's last use (eviction order).  Best effort; a
   * recent one is left alone so repeated hits cost no inode writes. */
  if (touch && out->st.st_mtime + CKJIT_DISK_TOUCH_GRANULARITY_S <= time(NULL))
    (void)futimens(fd, NULL);
  close(fd);
  out->file = buf;
  out->file_size = size;
  out->payload_offset = (size_t)(payload - buf);
  return 1;
}
