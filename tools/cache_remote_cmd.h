/* ckjit-cache push / pull / info with --remote URL (cache_remote_cmd.c):
 * the local cache directory `dir` and the remote cache tier
 * (cache/remote.h) at `url`.  Entries are verified with the library's own
 * rule in both directions; the exit status of the command: 0, 1 (failure or
 * bad entries), 2 (usage). */
#ifndef CKJIT_TOOLS_CACHE_REMOTE_CMD_H
#define CKJIT_TOOLS_CACHE_REMOTE_CMD_H

/* Every verified local entry to the remote cache (SET, the TTL of
 * CKJIT_REMOTE_CACHE_TTL); bad ones and ones over
 * CKJIT_REMOTE_CACHE_MAX_ENTRY are reported and not sent. */
int cache_cmd_push(const char *url, int json, const char *dir);
/* Every remote entry (SCAN MATCH ckjit:v1:*) that passes the rule into the
 * local cache (first writer wins, as in the library); bad ones are reported
 * and not stored. */
int cache_cmd_pull(const char *url, int json, const char *dir);
/* The remote cache's entries and bytes, leases in progress, and the
 * server's memory bound (used_memory, maxmemory, maxmemory-policy). */
int cache_cmd_remote_info(const char *url, int json);

#endif
