#!/usr/bin/env python3
"""End-to-end test of ckjit-cache and ckjit-inspect on a cache that
ckjit-prewarm filled, run by meson:

    test_tools_e2e.py --cache TOOL --prewarm TOOL [--inspect TOOL]

Every ckjit-cache subcommand run with --json, and the output parsed and
checked against the cache directory itself (the files are the truth, so a
tool that misreports what it did fails here):

  * --help, usage errors (exit 2), of ckjit-cache and ckjit-prewarm;
  * prewarm into an empty cache (everything compiled), then again (nothing
    compiled, everything cached, same keys);
  * info / ls / verify against the files on disk;
  * verify finding a corrupt entry and a symlinked one, --fix removing them
    and nothing else (not a foreign file, not a temporary file);
  * clear removing entries and temporary files, leaving foreign files;
  * export -> clear -> import -> verify round trip, then a prewarm that
    compiles nothing (the imported entries are used);
  * prune to a number of entries and to a size;
  * ckjit-inspect, when built.

ckjit-prewarm's own input and failure handling is test_prewarm_e2e.py; the
compiler probe, the skip rules and the helpers are tools_e2e_common.py.
"""
import os
import re
import shutil
import sys

from tools_e2e_common import (HEX32, SPECS, Skip, check, entry_files, items_by_pair, main, parse_json_p,
                              summary)


def temp_files(cache_dir):
    out = []
    for root, _dirs, files in os.walk(cache_dir):
        out += [os.path.join(root, f) for f in files if f.startswith(".tmp-")]
    return out


# ---- the parts -------------------------------------------------------------


def t_help_and_usage(t):
    for tool in (t.cache_tool, t.prewarm_tool):
        p = t.run([tool, "--help"])
        check(p.returncode == 0 and "usage" in p.stdout.lower(), f"{tool} --help: exit {p.returncode}")
        p = t.run([tool, "--no-such-option"])
        check(p.returncode == 2, f"{tool} --no-such-option: exit {p.returncode}, expected 2")
        check(p.stderr.strip(), f"{tool} --no-such-option: no message on stderr")
    p = t.run([t.cache_tool, "no-such-command"])
    check(p.returncode == 2, f"ckjit-cache no-such-command: exit {p.returncode}, expected 2")
    p = t.run([t.prewarm_tool])
    check(p.returncode == 2, f"ckjit-prewarm (no specs): exit {p.returncode}, expected 2")


def t_empty_cache(t):
    d = os.path.join(t.work, "never-created")
    p = t.cache(d, "info")
    check(p.json["exists"] is False and p.json["entries"] == 0, f"info on a missing dir: {p.json}")
    p = t.cache(d, "verify")
    check(p.json["bad_count"] == 0 and p.json["entries"] == 0, f"verify on a missing dir: {p.json}")
    p = t.cache(d, "ls")
    check(p.json["entries"] == [], f"ls on a missing dir: {p.json}")


def t_prewarm_twice(t):
    d = os.path.join(t.work, "twice")
    n = len(SPECS) * len(t.archs)
    p = t.prewarm(d, SPECS)
    s = summary(p)
    check(s["total"] == n and s["compiled"] == n and s["cached"] == 0 and s["failed"] == 0,
          f"first prewarm: summary {s}, expected {n} compiled")
    first = items_by_pair(p)
    check(len(first) == n, f"first prewarm: {len(first)} items, expected {n}")
    for (spec, arch), it in first.items():
        check(it["result"] == "compiled", f"first prewarm {spec} {arch}: {it['result']}")
        check(HEX32.match(it.get("key", "")), f"first prewarm {spec} {arch}: key {it.get('key')}")
        check(it.get("code_size", 0) > 0, f"first prewarm {spec} {arch}: code_size {it.get('code_size')}")
    files = entry_files(d)
    check(set(files) == {it["key"] for it in first.values()},
          f"entries on disk {sorted(files)} != prewarmed keys {sorted(it['key'] for it in first.values())}")
    check(not temp_files(d), f"temporary files left: {temp_files(d)}")
    # Second run: nothing compiled.
    p = t.prewarm(d, SPECS)
    s = summary(p)
    check(s["compiled"] == 0 and s["cached"] == n and s["failed"] == 0,
          f"second prewarm compiled something: summary {s}")
    second = items_by_pair(p)
    for pair, it in second.items():
        check(it["result"] == "cached", f"second prewarm {pair}: {it['result']}")
        check(it["key"] == first[pair]["key"] and it["code_size"] == first[pair]["code_size"],
              f"second prewarm {pair}: key/size changed")
    return d, first


def t_info_ls_verify(t, d, first):
    files = entry_files(d)
    p = t.cache(d, "info")
    total = sum(os.path.getsize(f) for f in files.values())
    check(p.json["entries"] == len(files) and p.json["bytes"] == total and p.json["temp_files"] == 0
          and p.json["problems"] == 0, f"info: {p.json}, expected {len(files)} entries, {total} bytes")
    p = t.cache(d, "ls")
    listed = {e["key"]: e for e in p.json["entries"]}
    check(set(listed) == set(files), f"ls keys {sorted(listed)} != files {sorted(files)}")
    by_key = {it["key"]: (spec, arch, it) for (spec, arch), it in first.items()}
    for key, e in listed.items():
        spec, arch, it = by_key[key]
        check(e["ok"] is True and e["arch"] == arch and e["kernel"] == it["kernel"]
              and e["payload_size"] == it["code_size"] and e["size"] == os.path.getsize(files[key]),
              f"ls entry {e} does not match prewarm's {it} ({spec}, {arch})")
    p = t.cache(d, "verify")
    check(p.json["bad_count"] == 0 and p.json["ok"] == len(files) and p.json["bad"] == [],
          f"verify: {p.json}")
    # Text output works as well.
    p = t.cache(d, "ls", json_out=False)
    check(all(k in p.stdout for k in files), "ls (text) does not list every key")


def t_verify_fix(t, d):
    files = entry_files(d)
    keys = sorted(files)
    check(len(keys) >= 3, "need 3 entries")
    corrupt, linked, good = keys[0], keys[1], keys[2:]
    with open(files[corrupt], "r+b") as f:
        f.seek(-1, os.SEEK_END)
        b = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([b[0] ^ 0xFF]))
    outside = os.path.join(t.work, "outside.ckjit")
    shutil.copyfile(files[linked], outside)
    os.unlink(files[linked])
    os.symlink(outside, files[linked])
    sub = os.path.dirname(files[good[0]])
    temp = os.path.join(sub, f".tmp-{good[0]}-1234-abcd-0")
    with open(temp, "wb") as f:
        f.write(b"partial")
    foreign = os.path.join(d, "README.not-ours")
    with open(foreign, "w") as f:
        f.write("a file the tools must leave alone\n")
    p = t.cache(d, "verify", expect=1)
    bad = {os.path.basename(b["path"]) for b in p.json["bad"]}
    check(bad == {corrupt + ".ckjit", linked + ".ckjit"},
          f"verify found {sorted(bad)}, expected the corrupt and the symlinked entry")
    check(p.json["bad_count"] == 2 and p.json["ok"] == len(good) and p.json["temp_files"] == 1,
          f"verify: {p.json}")
    p = t.cache(d, "verify", "--fix", expect=None)
    check(p.returncode in (0, 1), f"verify --fix: exit {p.returncode}")
    check(p.json["removed"] == 2 and p.json["remove_failed"] == 0, f"verify --fix: {p.json}")
    check(not os.path.lexists(files[corrupt]) and not os.path.lexists(files[linked]),
          "verify --fix left a bad entry")
    check(os.path.exists(outside), "verify --fix removed the symlink's target")
    check(os.path.exists(foreign) and os.path.exists(temp), "verify --fix removed a file it must not")
    p = t.cache(d, "verify")
    check(p.json["bad_count"] == 0 and p.json["ok"] == len(good), f"verify after --fix: {p.json}")
    # A prewarm puts the two back.
    p = t.prewarm(d, SPECS)
    check(summary(p)["compiled"] == 2, f"prewarm after --fix: {summary(p)}, expected 2 compiled")
    return foreign, temp


def t_clear(t, d, foreign, temp):
    n = len(entry_files(d))
    p = t.cache(d, "clear")
    check(p.json["removed_entries"] == n and p.json["removed_temp_files"] == 1
          and p.json["errors"] == [], f"clear: {p.json}, expected {n} entries and 1 temp file")
    check(entry_files(d) == {} and not os.path.exists(temp), "clear left entries or temp files")
    check(os.path.exists(foreign), "clear removed a foreign file")
    p = t.cache(d, "info")
    check(p.json["entries"] == 0 and p.json["other_files"] >= 1, f"info after clear: {p.json}")

def t_export_import(t):
    for c in ("export", "import"):
        t.need_command(c)
    a = os.path.join(t.work, "exp-a")
    b = os.path.join(t.work, "exp-b")
    first = items_by_pair(t.prewarm(a, SPECS))
    keys = {it["key"] for it in first.values()}
    before = {k: open(f, "rb").read() for k, f in entry_files(a).items()}
    archive = os.path.join(t.work, "cache-export.tar")
    p = t.cache(a, "export", archive, json_out=False)
    check(os.path.isfile(archive) and os.path.getsize(archive) > 0, f"export wrote no {archive}")
    t.cache(a, "clear")
    check(entry_files(a) == {}, "clear after export left entries")
    p = t.cache(a, "import", archive, json_out=False)
    check(set(entry_files(a)) == keys, f"import restored {sorted(entry_files(a))}, expected {sorted(keys)}")
    after = {k: open(f, "rb").read() for k, f in entry_files(a).items()}
    check(after == before, "imported entries differ from the exported ones")
    p = t.cache(a, "verify")
    check(p.json["bad_count"] == 0 and p.json["ok"] == len(keys), f"verify after import: {p.json}")
    # Into another, empty cache; then the entries are used (nothing compiled).
    t.cache(b, "import", archive, json_out=False)
    check(set(entry_files(b)) == keys, "import into an empty cache")
    s = summary(t.prewarm(b, SPECS))
    check(s["compiled"] == 0 and s["cached"] == len(first), f"prewarm after import compiled: {s}")
    # A damaged archive is refused without writing a bad entry.
    data = open(archive, "rb").read()
    bad_archive = os.path.join(t.work, "damaged.tar")
    with open(bad_archive, "wb") as f:
        f.write(data[: len(data) // 2] + bytes(b ^ 0x5A for b in data[len(data) // 2: len(data) // 2 + 512]))
    c = os.path.join(t.work, "exp-c")
    p = t.cache(c, "import", bad_archive, json_out=False, expect=None)
    check(p.returncode != 0, "import of a damaged archive succeeded")
    # All or nothing: not even the records before the damage are stored.
    check(entry_files(c) == {}, f"import of a damaged archive stored {sorted(entry_files(c))}")


def t_prune(t):
    t.need_command("prune")
    d = os.path.join(t.work, "prune")
    t.prewarm(d, SPECS)
    n = len(entry_files(d))
    help_text = t.run([t.cache_tool, "prune", "--help"]).stdout
    m = re.search(r"--max-entries\b", help_text)
    check(m, "prune: no --max-entries option in ckjit-cache prune --help")
    # Least recently used first: make half the entries old (the mtime is the
    # last use), then keep that many.
    files = entry_files(d)
    keys = sorted(files)
    keep = max(1, n // 2)
    old = set(keys[:n - keep])
    for i, k in enumerate(keys):
        age = 86400 * (10 + i) if k in old else 0
        st = os.stat(files[k])
        os.utime(files[k], (st.st_atime - age, st.st_mtime - age))
    p = t.cache(d, "prune", "--max-entries", str(keep), expect=None)
    check(p.returncode == 0, f"prune --max-entries {keep}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    left = entry_files(d)
    check(set(left) == set(keys) - old,
          f"prune --max-entries {keep} kept {sorted(left)}, expected the recently used {sorted(set(keys) - old)}")
    p = t.cache(d, "verify")
    check(p.json["bad_count"] == 0, f"verify after prune: {p.json}")
    if re.search(r"--max-size\b", help_text):
        one = max(os.path.getsize(f) for f in left.values())
        p = t.cache(d, "prune", "--max-size", str(one), expect=None)
        left = entry_files(d)
        total = sum(os.path.getsize(f) for f in left.values())
        check(p.returncode == 0 and 0 < total <= one,
              f"prune --max-size {one}: exit {p.returncode}, {total} bytes left")
        p = t.cache(d, "verify")
        check(p.json["bad_count"] == 0 and p.json["ok"] == len(left), f"verify after prune: {p.json}")


def t_inspect(t):
    if not t.inspect_tool or not os.path.exists(t.inspect_tool):
        raise Skip("ckjit-inspect is not built yet")
    p = t.run([t.inspect_tool, "--help"])
    check(p.returncode == 0 and "usage" in p.stdout.lower(), f"ckjit-inspect --help: exit {p.returncode}")
    p = t.run([t.inspect_tool, "--no-such-option"])
    check(p.returncode == 2, f"ckjit-inspect --no-such-option: exit {p.returncode}, expected 2")
    d = os.path.join(t.work, "inspect")
    first = items_by_pair(t.prewarm(d, SPECS))
    argv = [t.inspect_tool, "--cache-dir", d, "--arch", ",".join(t.archs), "--json"] + SPECS
    p = t.run(argv)
    p.cmd = " ".join(argv)
    check(p.returncode == 0, f"ckjit-inspect: exit {p.returncode}\n{p.stderr}")
    got = items_by_pair(parse_json_p(p))
    check(set(got) == set(first), f"ckjit-inspect items {sorted(got)} != {sorted(first)}")
    for pair, it in got.items():
        check(it["result"] == "ok" and it["key"] == first[pair]["key"] and it["cached"] is True
              and it["code_size"] == first[pair]["code_size"], f"ckjit-inspect {pair}: {it}")
        k = it.get("kernels") or []
        check(len(k) >= 1 and any(x.get("name") == first[pair]["kernel"] for x in k),
              f"ckjit-inspect {pair}: kernels {k}")
        for x in k:
            occ = x.get("occupancy", {})
            if occ.get("known"):
                check(0 < occ["occupancy"] <= 1, f"ckjit-inspect {pair}: occupancy {occ}")
    # Nothing was compiled: the cache is unchanged.
    check(set(entry_files(d)) == {it["key"] for it in first.values()}, "ckjit-inspect changed the cache")
    p = t.run([t.inspect_tool, "--cache-dir", d, "--arch", t.archs[0], "nosuch:x=1", SPECS[0]])
    check(p.returncode == 1 and "nosuch" in p.stderr, f"ckjit-inspect with a bad spec: exit {p.returncode}\n{p.stderr}")


def run_parts(t, part):
    part("help and usage errors", t_help_and_usage)
    part("tools on a missing cache", t_empty_cache)
    r = part("prewarm twice (second compiles nothing)", t_prewarm_twice)
    if r:
        d, first = r
        part("info / ls / verify", t_info_ls_verify, d, first)
        r2 = part("verify finds and --fix removes bad entries", t_verify_fix, d)
        if r2:
            part("clear", t_clear, d, *r2)
    part("export -> clear -> import -> verify", t_export_import)
    part("prune", t_prune)
    part("ckjit-inspect", t_inspect)


if __name__ == "__main__":
    sys.exit(main(run_parts))
