/* verify --fix: repairs of bad cache items (see cache_repair.h). */
#include "cache_repair.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache/entry_accept.h"

/* Deeper than any tree a cache holds; bounds the recursion below. */
#define MAX_TREE_DEPTH 32

/* Removes the directory `name` of `parent` and everything in it, never
 * following a link (a link inside is unlinked itself).  0, or -1 with errno. */
static int remove_tree(int parent, const char *name, int depth) {
  if (depth > MAX_TREE_DEPTH) {
    errno = ELOOP;
    return -1;
  }
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    if (errno != ENOTDIR && errno != ELOOP) return -1;
    return unlinkat(parent, name, 0) == 0 || errno == ENOENT ? 0 : -1; /* no longer a directory */
  }
  int dfd = dup(fd);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d) {
    int e = errno;
    if (dfd >= 0) close(dfd);
    close(fd);
    errno = e;
    return -1;
  }
  int rc = 0, err = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    struct stat st;
    if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    int r = S_ISDIR(st.st_mode) ? remove_tree(fd, de->d_name, depth + 1)
                                : unlinkat(fd, de->d_name, 0) == 0 || errno == ENOENT ? 0 : -1;
    if (r != 0 && !err) err = errno, rc = -1;
  }
  closedir(d);
  close(fd);
  if (rc == 0 && unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT) return -1;
  if (rc != 0) errno = err;
  return rc;
}

/* Repairs the subdirectory `name` in place (opened without following a
 * link, checked to be the listed one): removes group and other write
 * permission and, when run as root, gives a subdirectory of another user to
 * the cache directory's owner `owner`. */
static int repair_dir(int parent, const char *name, const cache_item *it, uid_t owner,
                      char *action, size_t len) {
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    snprintf(action, len, "could not fix: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return CACHE_REPAIR_FAILED;
  }
  int rc = CACHE_REPAIR_FIXED;
  mode_t mode = (st.st_mode & 0777) & ~(mode_t)(S_IWGRP | S_IWOTH);
  int chown_it = it->refusal == CKJIT_REFUSAL_OWNER;
  if ((uint64_t)st.st_dev != it->dev || (uint64_t)st.st_ino != it->ino) {
    snprintf(action, len, "replaced while running; left alone");
    rc = CACHE_REPAIR_FAILED;
  } else if (chown_it && geteuid() != 0) {
    snprintf(action, len, "could not fix: owned by uid %u; chown it to the cache directory's "
             "owner (uid %u), or remove it", (unsigned)st.st_uid, (unsigned)owner);
    rc = CACHE_REPAIR_FAILED;
  } else if (chown_it && fchown(fd, owner, (gid_t)-1) != 0) {
    snprintf(action, len, "could not fix: chown: %s", strerror(errno));
    rc = CACHE_REPAIR_FAILED;
  } else if (fchmod(fd, mode) != 0) {
    snprintf(action, len, "could not fix: chmod go-w: %s", strerror(errno));
    rc = CACHE_REPAIR_FAILED;
  } else if (chown_it) {
    snprintf(action, len, "owner set to uid %u (mode now %03o)", (unsigned)owner,
             (unsigned)mode);
  } else {
    snprintf(action, len, "write permission of group and others removed (mode now %03o)",
             (unsigned)mode);
  }
  close(fd);
  return rc;
}

cache_repair_result cache_repair_item(const char *dir, const cache_item *it, char *action,
                                      size_t len) {
  if (it->kind == CACHE_ITEM_FOREIGN) {
    snprintf(action, len, "left alone (not a cache file)");
    return CACHE_REPAIR_LEFT;
  }
  int root = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int parent = root;
  if (root >= 0 && it->subdir[0])
    parent = openat(root, it->subdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (root < 0 || parent < 0) {
    int e = errno;
    if (root >= 0) close(root);
    if (e == ENOENT) {
      snprintf(action, len, "removed (already gone)");
      return CACHE_REPAIR_REMOVED;
    }
    snprintf(action, len, "could not fix: %s", strerror(e));
    return CACHE_REPAIR_FAILED;
  }
  cache_repair_result rc;
  struct stat st;
  if (fstatat(parent, it->name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    rc = errno == ENOENT ? CACHE_REPAIR_REMOVED : CACHE_REPAIR_FAILED;
    snprintf(action, len, rc > 0 ? "removed (already gone)" : "could not fix: %s",
             strerror(errno));
  } else if ((uint64_t)st.st_dev != it->dev || (uint64_t)st.st_ino != it->ino) {
    snprintf(action, len, "replaced while running; left alone");
    rc = CACHE_REPAIR_FAILED;
  } else if (it->kind == CACHE_ITEM_SUBDIR && S_ISDIR(st.st_mode)) {
    /* A real subdirectory: its entries are judged one by one, so only the
     * directory itself is repaired, never emptied. */
    struct stat root_st;
    if (it->refusal != CKJIT_REFUSAL_MODE && it->refusal != CKJIT_REFUSAL_OWNER) {
      snprintf(action, len, "could not fix: %s", it->why);
      rc = CACHE_REPAIR_FAILED;
    } else if (fstat(root, &root_st) != 0) {
      snprintf(action, len, "could not fix: %s", strerror(errno));
      rc = CACHE_REPAIR_FAILED;
    } else {
      rc = repair_dir(parent, it->name, it, root_st.st_uid, action, len);
    }
  } else if (S_ISDIR(st.st_mode)) {
    rc = remove_tree(parent, it->name, 0) == 0 ? CACHE_REPAIR_REMOVED : CACHE_REPAIR_FAILED;
    if (rc > 0) snprintf(action, len, "removed (a directory, with its contents)");
    else snprintf(action, len, "could not remove: %s", strerror(errno));
  } else {
    rc = unlinkat(parent, it->name, 0) == 0 || errno == ENOENT ? CACHE_REPAIR_REMOVED
                                                               : CACHE_REPAIR_FAILED;
    if (rc > 0) snprintf(action, len, "removed");
    else snprintf(action, len, "could not remove: %s", strerror(errno));
  }
  if (parent != root) close(parent);
  close(root);
  return rc;
}
