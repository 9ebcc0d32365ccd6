/* The one way ckjit writes files: every file the library writes (cache
 * entries, CKJIT_DUMP_DIR dumps, the CKJIT_RECORD file, CKJIT_TUNE's
 * gemm-tune.txt and attention-tune.txt, ckjit-cache's archive export) goes through these functions, so each kind of write has one
 * implementation and one argument for why readers never see a torn file.
 *
 * The ways to write:
 *
 *  - Whole files (ckjit__file_write, ckjit__file_write_at): the bytes go to
 *    a new temporary file in the target's directory (created O_EXCL, never
 *    through a symlink), optionally fsynced, closed and rename()d over the
 *    target.  A reader, or a concurrent writer, sees the old file or the new
 *    one, whole, never a mixture; a failed write removes its temporary file
 *    and leaves the target as it was.  With CKJIT_FILE_SYNC the new bytes
 *    are on disk before the rename, so a crash also leaves one or the other
 *    (without it, a crash soon after may leave an empty or partial file on
 *    some file systems: fine for debugging output, not for cache entries).
 *
 *  - Whole files written as a stream (ckjit__file_stream_*: an archive
 *    export, whose size is not known in advance): the same temporary file
 *    and rename, with the bytes written through a FILE in between.
 *
 *  - Appended records (ckjit__file_append): one line added to a shared
 *    file with one write() of at most PIPE_BUF bytes on a descriptor opened
 *    with O_APPEND for that line, so any number of processes append to one
 *    file without a lock and without interleaving inside a line, and a
 *    process that dies holds nothing.  A short write is not retried (the
 *    rest would no longer be atomic).
 *
 * Errors: the functions taking a path record a failure through
 * ckjit__fail (CKJIT_ERROR_CACHE, "cannot <step> <path>: <reason>"); callers
 * for whom writing is best effort wrap them in ckjit__error_quiet so that a
 * call that succeeds keeps ckjit_last_error() as it was.
 * ckjit__file_write_at records nothing: it is the disk cache's step, whose
 * caller words the failure itself.  All of them also fill a
 * ckjit_file_error (when given), for callers that word their own warnings. */
#ifndef CKJIT_CACHE_ATOMIC_FILE_H
#define CKJIT_CACHE_ATOMIC_FILE_H

#include <stddef.h>
#include "ckjit/ckjit.h"

/* ---- flags ---------------------------------------------------------------- */
/* Whole files: fsync the temporary file before the rename (durable). */
#define CKJIT_FILE_SYNC 1u
/* Appends: when the file does not end with a newline (a line torn by a
 * crash), start the record on a new line (the newline goes out in the same
 * write).  Opens the file O_RDWR instead of O_WRONLY, to read its last
 * byte.  That read is not atomic with the write: it may see another
 * process's record while it is being written, and then adds an empty line,
 * so readers of such a file skip empty lines. */
#define CKJIT_FILE_NEW_LINE 2u
/* Whole files: never replace an existing `name`; when there is one, the
 * write fails with EEXIST and the file is left as it was (renameat2's
 * RENAME_NOREPLACE, or a hard link where the file system lacks it). */
#define CKJIT_FILE_NO_REPLACE 4u

/* What failed: `err` is the errno of the failed step (0 for a short append:
 * fewer bytes were written than asked, nothing else is known); `step` names
 * it as a verb phrase for "cannot <step> <path>": "open", "create a
 * temporary file for", "write" (writing, fsync, close and, for whole files,
 * the rename), or "append to" (a record longer than PIPE_BUF: EINVAL). */
typedef struct ckjit_file_error {
  int err;
  const char *step;
} ckjit_file_error;

/* Test hook of ckjit__file_write_at: called before each step of a write with
 * the step's name and the temporary file's path:
 *   "open-temp"  before creating the temporary file
 *   "write"      after the first half of the bytes were written to it
 *   "fsync"      after all bytes were written, before fsync (CKJIT_FILE_SYNC only)
 *   "rename"     after the close, before renaming it over the target
 * 0 lets the step run; an errno value makes the write behave exactly as if
 * the step's system call had failed with it.  The disk cache's
 * ckjit__disk_fault_hook is one (cache/disk_cache.h). */
typedef int (*ckjit_file_hook)(const char *stage, const char *tmp_path);

/* ---- whole files ------------------------------------------------------------ */
/* Writes `size` bytes as the whole file `name` of the directory `dir_fd`
 * (an open directory, or AT_FDCWD with paths): first to the new file
 * `tmp_name` in the same directory (created O_WRONLY | O_CREAT | O_EXCL |
 * O_NOFOLLOW with the permission bits `mode`, less the umask), then, with
 * CKJIT_FILE_SYNC, fsync, then close and renameat over `name`.  `dir_path`
 * (may be NULL) is the directory's path, only to name the temporary file to
 * `hook` (NULL: none).  Returns 0, or the errno of the failed step (*e says
 * which, when e is not NULL); the temporary file is then removed.  Records
 * nothing in the thread's error. */
int ckjit__file_write_at(int dir_fd, const char *dir_path, const char *name, const char *tmp_name,
                         const void *buf, size_t size, unsigned mode, unsigned flags,
                         ckjit_file_hook hook, ckjit_file_error *e);

/* Writes `size` bytes as the whole file `path`, atomically as above, through
 * a temporary file ".<name>.tmp-<pid>-<thread>-<n>" next to it (unique per
 * process, thread and call).  A new file gets the permission bits `mode`,
 * less the umask; so does a file it replaces (the rename puts a new file in
 * its place; a symlink at `path` is replaced, not followed).  The directory
 * must exist.  Returns CKJIT_SUCCESS, or CKJIT_ERROR_CACHE recorded through
 * ckjit__fail with the step, the path and the reason (and *e filled). */
ckjit_status ckjit__file_write(const char *path, const void *buf, size_t size, unsigned mode,
                               unsigned flags, ckjit_file_error *e);

/* ---- whole files written as a stream ------------------------------------------ */
#include <limits.h>
#include <stdio.h>
typedef struct ckjit_file_stream {
  FILE *file; /* write the contents here, then commit or abort */
  char path[PATH_MAX + 1], tmp[PATH_MAX + 1];
} ckjit_file_stream;

/* Opens a new temporary file next to `path` (as ckjit__file_write names
 * it; permission bits `mode`, less the umask).  CKJIT_ERROR_CACHE recorded
 * through ckjit__fail when it cannot be created. */
ckjit_status ckjit__file_stream_open(ckjit_file_stream *s, const char *path, unsigned mode);
/* Flushes (with CKJIT_FILE_SYNC: and fsyncs) and closes the temporary file
 * and renames it over the path; on any failure (a write error seen by the
 * FILE included) removes it, leaves the path as it was and records
 * CKJIT_ERROR_CACHE ("cannot write <path>: <reason>"). */
ckjit_status ckjit__file_stream_commit(ckjit_file_stream *s, unsigned flags);
/* Closes and removes the temporary file (nothing written to the path). */
void ckjit__file_stream_abort(ckjit_file_stream *s);

/* ---- appended records ------------------------------------------------------- */
/* Appends `len` bytes (one record, a line) to `path`, creating it with the
 * permission bits `mode` (less the umask) when missing: open(O_WRONLY |
 * O_APPEND | O_CREAT | O_CLOEXEC), one write() (retried only on EINTR
 * before anything was written), close.  With CKJIT_FILE_NEW_LINE a newline
 * is put first when the file's last byte is not one.  The whole write
 * (newline included) must be at most PIPE_BUF bytes, so that concurrent
 * appenders never interleave inside it: a record longer than PIPE_BUF bytes
 * (PIPE_BUF - 1 with CKJIT_FILE_NEW_LINE) is refused (EINVAL) before the
 * file is opened.  A failed close after a whole write counts as a
 * failed write (NFS reports write errors there).  Returns CKJIT_SUCCESS, or
 * CKJIT_ERROR_CACHE recorded through ckjit__fail (and *e filled). */
ckjit_status ckjit__file_append(const char *path, const void *buf, size_t len, unsigned mode,
                                unsigned flags, ckjit_file_error *e);

/* ---- directories ------------------------------------------------------------ */
/* Creates the directory `path` with `mode` (less the umask) unless it
 * exists; with `parents`, each missing directory above it too (mkdir -p).
 * Returns 0, or -1 with errno set (records nothing: callers word it). */
int ckjit__file_make_dir(const char *path, unsigned mode, int parents);

#endif
