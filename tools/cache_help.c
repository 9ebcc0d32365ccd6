/* ckjit-cache's help texts: the usage, the options every command takes, and
 * each command's own help. */
#include "cache_help.h"

#include <string.h>

const char cache_common_help[] =
    "options (any command):\n"
    "  --cache-dir DIR  the writable cache directory (default: the one the library\n"
    "                   uses: CKJIT_CACHE_DIR, XDG_CACHE_HOME/ckjit, ~/.cache/ckjit)\n"
    "  --remote URL     the remote cache (push, pull, info): redis://[user[:password]@]\n"
    "                   host[:port][/db] or unix:///path/to.sock; the password may\n"
    "                   come from CKJIT_REMOTE_CACHE_PASSWORD_FILE instead, and is\n"
    "                   never printed; timeouts, TTL and the largest entry from the\n"
    "                   CKJIT_REMOTE_CACHE_* variables\n"
    "  --json           machine-readable output on stdout\n"
    "  -h, --help       help (of the command, after one)\n"
    "\n"
    "Symbolic links are never followed; one inside the cache is reported as bad.\n"
    "Exit status: 0 full success, 1 failure (or bad entries), 2 usage error.\n";

void cache_usage(FILE *out) {
  fputs(
      "usage: ckjit-cache [options] COMMAND [ARGS]\n"
      "\n"
      "Inspects and maintains the ckjit on-disk kernel cache\n"
      "(<cache-dir>/xx/<32-hex-key>.ckjit).\n"
      "\n"
      "commands:\n"
      "  info         cache directory, read-only layers (CKJIT_CACHE_PATH), entries,\n"
      "               bytes, limits; with --remote URL the remote cache's entries,\n"
      "               bytes and memory bound\n"
      "  ls           one line per entry: key, kernel, arch, size, age, last use\n"
      "  verify       check every entry with the library's own rule; --fix repairs\n"
      "  prune        remove least recently used entries down to the limits\n"
      "  clear        remove every entry and leftover temporary file (nothing else)\n"
      "  export FILE  write every verified entry into one archive file (- = stdout)\n"
      "  import FILE  verify and store every entry of an archive (- = stdin)\n"
      "  push         copy every verified entry to the remote cache (--remote URL)\n"
      "  pull         copy every verified entry of the remote cache here (--remote URL)\n"
      "\n"
      "'ckjit-cache COMMAND --help' describes a command.\n"
      "\n",
      out);
  fputs(cache_common_help, out);
}

typedef struct command_help {
  const char *name;
  const char *text;
} command_help;

static const command_help helps[] = {
    {"info",
     "usage: ckjit-cache [options] info [--remote URL]\n\n"
     "Prints the writable cache directory, its entries and bytes, its limits\n"
     "(CKJIT_CACHE_MAX_SIZE, CKJIT_CACHE_MAX_ENTRIES) and each read-only layer of\n"
     "CKJIT_CACHE_PATH with its entries, or why the library skips it.\n"
     "With --remote URL: the remote cache's entries (names ckjit:v1:<key>, listed\n"
     "with SCAN, never KEYS) and their bytes, the leases of compiles in progress,\n"
     "and the server's memory use, maxmemory and maxmemory-policy (the store's\n"
     "bound: maxmemory with allkeys-lru; see README).\n"},
    {"ls",
     "usage: ckjit-cache [options] ls\n\n"
     "One line per entry of the writable cache: key, kernel, arch, size, age (since\n"
     "the file was created, '-' where the file system does not record it) and last\n"
     "use (the entry file's mtime, which the library sets on every use).\n"},
    {"verify",
     "usage: ckjit-cache [options] verify [--fix]\n\n"
     "Applies the library's own acceptance rule to every subdirectory and entry\n"
     "(real directory or regular file, owner, no group/other write permission,\n"
     "header, checksums, header key = file name, right subdirectory, a code object\n"
     "for the entry's arch that defines its kernel) and prints the bad ones; exits\n"
     "1 if there are any.  What it calls bad, the library refuses to load.\n"
     "  --fix  repair them: remove anything bad at an entry's or a subdirectory's\n"
     "         name (a directory there with its contents; a link itself, never its\n"
     "         target), remove group/other write permission from a subdirectory\n"
     "         (its good entries stay); never touches a name that is not the\n"
     "         cache's own.  Exits 0 when nothing bad is left.\n"},
    {"prune",
     "usage: ckjit-cache [options] prune [--max-size N[K|M|G|T]] [--max-entries N]\n\n"
     "Removes entries, least recently used first, until the cache holds at most\n"
     "the limits (default: CKJIT_CACHE_MAX_SIZE, else 1G; CKJIT_CACHE_MAX_ENTRIES,\n"
     "else 50000; 0 = no limit), and temporary files left over for over an hour.\n"
     "--max-size: digits (bytes), or a number with K, M, G or T (powers of 1024,\n"
     "optionally followed by iB; a fraction only with a suffix): 1073741824, 512M,\n"
     "1.5G, 2GiB.  --max-entries: digits.  Anything else exits 2 with the reason.\n"
     "Exits 1 when the cache is still over a limit (entries in use, removal errors).\n"},
    {"clear",
     "usage: ckjit-cache [options] clear\n\n"
     "Removes every entry and leftover temporary file, and the subdirectories left\n"
     "empty; never anything else.\n"},
    {"export",
     "usage: ckjit-cache [options] export FILE\n\n"
     "Writes every verified entry of the writable cache into the archive FILE\n"
     "(- = stdout), e.g. to ship a prewarmed cache; bad entries are reported and\n"
     "left out (exit 1).  FILE is written to a temporary name and renamed.\n"},
    {"import",
     "usage: ckjit-cache [options] import FILE\n\n"
     "Reads the archive FILE (- = stdin), verifies all of it (framing, every\n"
     "entry's checksums and key) and only then stores its entries into the\n"
     "writable cache like the library does (atomically): all or nothing.  A\n"
     "damaged archive, or one with a bad entry (each is reported), stores nothing\n"
     "and exits 1; so does a store that fails (what was stored is removed).\n"
     "stdin is copied into an unlinked temporary file in the cache directory to\n"
     "be read twice.  Nothing is evicted meanwhile; run 'prune' afterwards if the\n"
     "cache is over its limits.\n"
     "A directory meant as a read-only layer for other users (CKJIT_CACHE_PATH)\n"
     "needs 'chmod -R go+rX,go-w DIR' afterwards (entries are written 0600).\n"},
    {"push",
     "usage: ckjit-cache [options] push --remote URL\n\n"
     "Copies every entry of the writable cache to the remote cache (SET\n"
     "ckjit:v1:<key>, expiring after CKJIT_REMOTE_CACHE_TTL seconds when set), e.g.\n"
     "to seed a fleet from a prewarmed directory.  Each entry is first read and\n"
     "verified with the library's rule; a bad one is reported and not sent (exit\n"
     "1), one over CKJIT_REMOTE_CACHE_MAX_ENTRY (default 64M) is reported and\n"
     "skipped.  The value is the entry file's bytes, verified again by every\n"
     "process that fetches it.\n"},
    {"pull",
     "usage: ckjit-cache [options] pull --remote URL\n\n"
     "Copies every entry of the remote cache (SCAN MATCH ckjit:v1:*) into the\n"
     "writable cache.  Each value is verified with the library's rule (header,\n"
     "checksums, the key of its name, a code object for its arch) before it is\n"
     "stored, atomically like the library's stores; a bad one is reported and not\n"
     "stored (exit 1).  An entry already in the cache stays as it is.\n"},
};

const char *cache_command_help(const char *name) {
  for (size_t i = 0; i < sizeof helps / sizeof helps[0]; i++)
    if (strcmp(helps[i].name, name) == 0) return helps[i].text;
  return NULL;
}
