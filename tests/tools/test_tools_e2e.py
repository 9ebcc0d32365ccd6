#!/usr/bin/env python3
"""End-to-end test of the command-line tools, run by meson:

    test_tools_e2e.py --cache TOOL --prewarm TOOL [--inspect TOOL]

Every ckjit-cache subcommand and ckjit-prewarm run with --json, and the
output parsed and checked against the cache directory itself:

  * --help, usage errors (exit 2);
  * prewarm into an empty cache (everything compiled), then again (nothing
    compiled, everything cached, same keys);
  * info / ls / verify against the files on disk;
  * verify finding a corrupt entry and a symlinked one, --fix removing them
    and nothing else (not a foreign file, not a temporary file);
  * clear removing entries and temporary files, leaving foreign files;
  * prewarm with a bad spec and a bad arch: a clear error naming each, the
    good items still compiled, exit status 1;
  * export -> clear -> import -> verify round trip, then a prewarm that
    compiles nothing (the imported entries are used);
  * prune to a number of entries and to a size;
  * prewarm -j N (worker processes) giving the serial run's keys;
  * three prewarms filling one empty cache at once;
  * prewarm --manifest (with a malformed line reported by line number), and
    a CKJIT_RECORD file replayed as a manifest;
  * prewarm with the arch from CKJIT_ARCH instead of --arch (it crashed);
  * prewarm failing, with exit status 1, each item whose entry was not
    stored: a directory planted at an entry's path, and a full 64 KiB tmpfs
    (root only); every item it reports compiled or cached is on disk;
  * ckjit-inspect, when built.

The compiler is whichever is present: NVRTC (sm_90) and/or hipRTC (gfx90a).
Parts whose subcommand or option does not exist yet (not in the tool's
--help) are skipped with the reason; the test then exits 77 when nothing
failed.  Once they exist, they are checked and fail like everything else.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback

# Canonical text (every key, in order): the tools report specs that way.
SPECS = [
    "elementwise:dtype=f32,op=relu,epilogue=none,vec=4,threads=256,unroll=1",
    "elementwise:dtype=f16,op=add,epilogue=none,vec=4,threads=256,unroll=1",
    "transpose:dtype=f32,tile=64,vec=4,threads=256",
    "transpose:dtype=bf16,tile=32,vec=4,threads=256",
]
HEX32 = re.compile(r"^[0-9a-f]{32}$")


class Skip(Exception):
    pass


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


class Tools:
    def __init__(self, args, work):
        self.cache_tool = args.cache
        self.prewarm_tool = args.prewarm
        self.inspect_tool = args.inspect
        self.work = work
        self.env = dict(os.environ)
        for v in ("CKJIT_CACHE_DIR", "CKJIT_CACHE_DISABLE", "CKJIT_ARCH", "CKJIT_DUMP_DIR",
                  "CKJIT_CACHE_PATH", "CKJIT_CACHE_MAX_SIZE", "CKJIT_CACHE_MAX_ENTRIES",
                  "CKJIT_RECORD", "CKJIT_LOG"):
            self.env.pop(v, None)
        # Nothing may fall back on the user's own cache.
        self.env["XDG_CACHE_HOME"] = os.path.join(work, "xdg")
        self.cache_help = self.run([self.cache_tool, "--help"]).stdout
        self.prewarm_help = self.run([self.prewarm_tool, "--help"]).stdout
        self.archs = []

    def run(self, argv, env=None, timeout=600, stdin=None):
        e = dict(self.env)
        if env:
            e.update(env)
        p = subprocess.run(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout, input=stdin)
        p.cmd = " ".join(argv)
        return p

    def cache(self, cache_dir, *args, json_out=True, expect=0):
        argv = [self.cache_tool, "--cache-dir", cache_dir] + (["--json"] if json_out else []) + list(args)
        p = self.run(argv)
        if expect is not None:
            check(p.returncode == expect,
                  f"{p.cmd}: exit {p.returncode}, expected {expect}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        if json_out:
            p.json = parse_json(p)
        return p

    def prewarm(self, cache_dir, specs, archs=None, extra=(), expect=0, env=None, json_out=True):
        archs = archs or self.archs
        argv = [self.prewarm_tool, "--cache-dir", cache_dir, "--arch", ",".join(archs)]
        argv += (["--json"] if json_out else []) + list(extra) + list(specs)
        p = self.run(argv, env=env)
        if expect is not None:
            check(p.returncode == expect,
                  f"{p.cmd}: exit {p.returncode}, expected {expect}\nstdout:\n{p.stdout[-3000:]}\n"
                  f"stderr:\n{p.stderr[-3000:]}")
        if json_out:
            p.json = parse_json(p)
        return p

    def has_command(self, name):
        """Whether ckjit-cache lists subcommand `name` in its --help."""
        return re.search(r"^\s+" + re.escape(name) + r"\b", self.cache_help, re.M) is not None

    def need_command(self, name):
        if not self.has_command(name):
            raise Skip(f"ckjit-cache has no '{name}' subcommand yet (not in --help)")

    def need_prewarm_option(self, opt):
        if not re.search(r"(^|[\s,\[])" + re.escape(opt) + r"\b", self.prewarm_help, re.M):
            raise Skip(f"ckjit-prewarm has no '{opt}' option yet (not in --help)")


def parse_json(p):
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        raise Failure(f"{p.cmd}: stdout is not JSON ({e}):\n{p.stdout[:3000]}\nstderr:\n{p.stderr[-2000:]}")


def entry_files(cache_dir):
    """{key: path} of the entry files below cache_dir."""
    out = {}
    if not os.path.isdir(cache_dir):
        return out
    for sub in sorted(os.listdir(cache_dir)):
        d = os.path.join(cache_dir, sub)
        if len(sub) != 2 or not os.path.isdir(d) or os.path.islink(d):
            continue
        for name in os.listdir(d):
            if name.endswith(".ckjit") and HEX32.match(name[:-6]):
                out[name[:-6]] = os.path.join(d, name)
    return out


def temp_files(cache_dir):
    out = []
    for root, _dirs, files in os.walk(cache_dir):
        out += [os.path.join(root, f) for f in files if f.startswith(".tmp-")]
    return out


def items_by_pair(p):
    items = p.json.get("items")
    check(isinstance(items, list), f"{p.cmd}: no 'items' array in the JSON")
    return {(it["spec"], it["arch"]): it for it in items}


def summary(p):
    s = p.json.get("summary")
    check(isinstance(s, dict), f"{p.cmd}: no 'summary' object in the JSON")
    return s


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


def t_bad_spec_and_arch(t):
    d = os.path.join(t.work, "bad")
    good = SPECS[0]
    bad_spec = "elementwise:dtype=f32,op=no_such_op"
    bad_arch = "sm_5"
    archs = t.archs + [bad_arch]
    p = t.prewarm(d, [good, bad_spec], archs=archs, expect=1)
    items = p.json["items"]
    for arch in t.archs:
        ok = [it for it in items if it["spec"] == good and it["arch"] == arch]
        check(len(ok) == 1 and ok[0]["result"] == "compiled",
              f"the good spec for {arch}, beside a bad spec and a bad arch: {ok}")
    # A bad spec or arch fails its own item(s) (once, or once per pair),
    # with a status and a message naming it; nothing else fails.
    failed = [it for it in items if it["result"] == "failed"]
    bad_s = [it for it in failed if "no_such_op" in it.get("error", "")]
    bad_a = [it for it in failed if bad_arch in it.get("error", "")]
    check(bad_s and all(it["status"] == "CKJIT_ERROR_INVALID_ARGUMENT" for it in bad_s),
          f"no failed item names the bad spec: {failed}")
    check(bad_a and all(it["status"].startswith("CKJIT_ERROR_") for it in bad_a),
          f"no failed item names the bad arch: {failed}")
    check(len(failed) == len(items) - len(t.archs), f"other items failed: {failed}")
    check(all(it["result"] != "failed" or it in bad_s or it in bad_a for it in items),
          f"a failed item names neither the bad spec nor the bad arch: {failed}")
    s = summary(p)
    check(s["compiled"] == len(t.archs) and s["failed"] == len(failed), f"summary {s}")
    check("no_such_op" in p.stderr and bad_arch in p.stderr,
          f"stderr does not name the bad spec and arch:\n{p.stderr}")
    goods = [it for it in items if it["result"] == "compiled"]
    check(set(entry_files(d)) == {it["key"] for it in goods},
          "the cache holds other entries than the good ones")
    # Not an arch name at all, and a malformed spec: the same, not a crash.
    p = t.prewarm(d, [good, "elementwise:dtype"], archs=t.archs + ["bogus!"], expect=1)
    s = summary(p)
    check(s["cached"] == len(t.archs) and s["compiled"] == 0 and s["failed"] >= 2,
          f"second bad run: {s}")
    # Only bad input: still exit 1 (not 0, not a crash).
    p = t.prewarm(d, ["nosuch:x=1"], expect=1)


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


def t_parallel_prewarm(t):
    t.need_prewarm_option("-j")
    serial = items_by_pair(t.prewarm(os.path.join(t.work, "serial"), SPECS))
    d = os.path.join(t.work, "parallel")
    p = t.prewarm(d, SPECS, extra=["-j", "3"])
    par = items_by_pair(p)
    s = summary(p)
    check(s["compiled"] == len(serial) and s["failed"] == 0, f"prewarm -j 3: {s}")
    for pair, it in serial.items():
        check(par[pair]["key"] == it["key"] and par[pair]["code_size"] == it["code_size"],
              f"prewarm -j 3 {pair}: {par[pair]} != serial {it}")
    p = t.cache(d, "verify")
    check(p.json["bad_count"] == 0 and p.json["ok"] == len(serial) and p.json["temp_files"] == 0,
          f"verify after -j: {p.json}")
    # Failures in workers are reported like serial ones.
    p = t.prewarm(d, [SPECS[0], "nosuch:x=1"], extra=["-j", "2"], expect=1)
    s = summary(p)
    check(s["failed"] >= 1 and s["cached"] == len(t.archs) and s["compiled"] == 0,
          f"-j with a bad spec: {s}")
    check("nosuch" in p.stderr, f"-j: the bad spec is not named on stderr:\n{p.stderr}")


def t_concurrent_prewarms(t):
    """Three ckjit-prewarm processes (with workers when -j exists) filling one
    empty cache at once: all succeed with the same keys; the cache verifies,
    holds one entry per pair and no temporary file."""
    d = os.path.join(t.work, "concurrent")
    extra = ["-j", "2"] if re.search(r"(^|[\s,])-j\b", t.prewarm_help, re.M) else []
    e = dict(t.env)
    procs = []
    for i in range(3):
        specs = SPECS[i:] + SPECS[:i]  # different orders
        argv = [t.prewarm_tool, "--cache-dir", d, "--arch", ",".join(t.archs), "--json"] + extra + specs
        procs.append(subprocess.Popen(argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    keys = None
    for i, pr in enumerate(procs):
        out, err = pr.communicate(timeout=600)
        check(pr.returncode == 0, f"concurrent prewarm {i}: exit {pr.returncode}\n{err[-3000:]}")
        items = {(it["spec"], it["arch"]): it["key"] for it in json.loads(out)["items"]}
        check(keys is None or items == keys, f"concurrent prewarm {i}: other keys than prewarm 0")
        keys = items
    p = t.cache(d, "verify")
    n = len(SPECS) * len(t.archs)
    check(p.json["bad_count"] == 0 and p.json["ok"] == n and p.json["temp_files"] == 0,
          f"verify after concurrent prewarms: {p.json}")
    check(set(entry_files(d)) == set(keys.values()), "entries on disk != the prewarmed keys")


def t_manifest(t):
    t.need_prewarm_option("--manifest")
    d = os.path.join(t.work, "manifest")
    man = os.path.join(t.work, "specs.manifest")
    arch = t.archs[0]
    with open(man, "w") as f:
        f.write("# prewarm manifest\n")
        f.write(f"{arch} {SPECS[0]}\n")
        f.write(f"ckjit-spec 1 {arch} {SPECS[2]}   # a record line\n")
        f.write("\n")
    p = t.prewarm(d, [], archs=[arch], extra=["--manifest", man])
    got = {(it["spec"], it["arch"]) for it in p.json["items"]}
    check(got == {(SPECS[0], arch), (SPECS[2], arch)}, f"--manifest items {sorted(got)}")
    check(summary(p)["compiled"] == 2, f"--manifest: {summary(p)}")
    # A malformed line: reported with its line number, the rest still built.
    with open(man, "a") as f:
        f.write("ckjit-spec 99 sm_90 elementwise:dtype=f32\n")  # line 5
        f.write(f"{arch} {SPECS[1]}\n")
    p = t.prewarm(d, [], archs=[arch], extra=["--manifest", man], expect=None)
    check(p.returncode != 0, "--manifest with a malformed line exited 0")
    check(re.search(r"\b5\b", p.stderr) is not None, f"the malformed line's number is not reported:\n{p.stderr}")
    check((SPECS[1], arch) in set(entry_pairs(p)), "the line after the malformed one was not built")


def entry_pairs(p):
    try:
        return [(it["spec"], it["arch"]) for it in p.json["items"] if it["result"] != "failed"]
    except (AttributeError, KeyError, TypeError):
        return []


def t_record_replay(t):
    """A file in the CKJIT_RECORD format (what an application run with
    CKJIT_RECORD=FILE appends: one 'ckjit-spec 1 ARCH SPEC' line per kernel
    and process, so the same line may come several times), replayed with
    --manifest.  (Recording itself happens on the launch path, which needs a
    GPU: tested by the GPU suite, not here.)"""
    t.need_prewarm_option("--manifest")
    rec = os.path.join(t.work, "record.manifest")
    with open(rec, "w") as f:
        for _process in range(3):
            for arch in t.archs:
                for spec in SPECS[:2]:
                    f.write(f"ckjit-spec 1 {arch} {spec}\n")
    d = os.path.join(t.work, "replayed")
    # --arch names an arch no line uses: the records' own archs apply.
    p = t.prewarm(d, [], archs=["sm_80"], extra=["--manifest", rec])
    got = items_by_pair(p)
    want = {(spec, arch) for arch in t.archs for spec in SPECS[:2]}
    done = {pair for pair, it in got.items() if it["result"] in ("compiled", "cached")}
    check(done == want, f"replayed {sorted(done)}, expected {sorted(want)}")
    check(summary(p)["compiled"] == len(want), f"each recorded pair compiles once: {summary(p)}")
    # The same keys as a direct prewarm.
    direct = items_by_pair(t.prewarm(d, SPECS[:2]))
    for pair, it in direct.items():
        check(it["result"] == "cached" and it["key"] == got[pair]["key"], f"{pair}: {it} vs {got[pair]}")
    # From stdin too.
    p = t.run([t.prewarm_tool, "--cache-dir", d, "--json", "--manifest", "-"], stdin=open(rec).read())
    check(p.returncode == 0, f"--manifest -: exit {p.returncode}\n{p.stderr}")
    p.json = parse_json(p)
    check(summary(p)["cached"] == len(want) and summary(p)["compiled"] == 0,
          f"--manifest - (stdin): {summary(p)}")


def t_prewarm_configured_arch(t):
    """No --arch: the arch comes from CKJIT_ARCH (issue 15, item 1: this path
    crashed with SIGSEGV).  Text and JSON, an invalid configured arch, and
    no arch at all on a host without a GPU (a usage error, exit 2)."""
    for arch in t.archs:
        d = os.path.join(t.work, "configured-" + arch)
        for json_out in (True, False):
            argv = [t.prewarm_tool, "--cache-dir", d] + (["--json"] if json_out else []) + SPECS[:2]
            p = t.run(argv, env={"CKJIT_ARCH": arch})
            p.cmd = f"CKJIT_ARCH={arch} " + " ".join(argv)
            check(p.returncode == 0, f"{p.cmd}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
            if json_out:
                got = items_by_pair(parse_json_p(p))
                check({pair[1] for pair in got} == {arch} and len(got) == 2, f"{p.cmd}: items {sorted(got)}")
                check({it["key"] for it in got.values()} <= set(entry_files(d)),
                      f"{p.cmd}: reported entries are not in {d}")
    # A configured arch that is well formed but not a target: the items fail
    # with the reason, not the process.
    p = t.run([t.prewarm_tool, "--cache-dir", os.path.join(t.work, "configured-bad"), "--json", SPECS[0]],
              env={"CKJIT_ARCH": "gfx1"})
    check(p.returncode in (1, 2) and p.stderr.strip(), f"CKJIT_ARCH=gfx1: exit {p.returncode}\n{p.stderr}")
    # Neither --arch nor CKJIT_ARCH: the GPU's arch, or (here, without one)
    # a clean usage error naming the fix.
    p = t.run([t.prewarm_tool, "--cache-dir", os.path.join(t.work, "configured-none"), SPECS[0]])
    check(p.returncode >= 0, f"prewarm without an arch died from signal {-p.returncode}")
    if p.returncode != 0:
        check(p.returncode == 2 and "--arch" in p.stderr,
              f"prewarm without an arch and no GPU: exit {p.returncode}, expected 2 naming --arch\n{p.stderr}")


def check_honest(p, cache_dir):
    """Every item reported compiled or cached has its entry in cache_dir; the
    others failed, those not stored with CKJIT_ERROR_CACHE and the reason;
    the summary counts them and the exit status follows."""
    s = summary(p)
    on_disk = {k for k, f in entry_files(cache_dir).items() if os.path.isfile(f) and not os.path.islink(f)}
    items = p.json["items"]
    unstored = [it for it in items if it["result"] == "failed" and it.get("status") == "CKJIT_ERROR_CACHE"]
    for it in items:
        if it["result"] in ("compiled", "cached"):
            check(it["key"] in on_disk and it.get("stored") is True,
                  f"{p.cmd}: {it['arch']} {it['spec']} reported {it['result']} but its entry is not in {cache_dir}")
        else:
            check(it.get("stored") is False, f"{p.cmd}: a failed item says stored: {it}")
    for it in unstored:
        check("not stored" in it["error"] and HEX32.match(it.get("key", "")) and it.get("code_size", 0) > 0,
              f"{p.cmd}: a not-stored item without its reason, key or size: {it}")
        check(it["key"] not in on_disk, f"{p.cmd}: {it['key']} is on disk but reported not stored")
    failed = [it for it in items if it["result"] == "failed"]
    check(s["failed"] == len(failed) and s["not_stored"] == len(unstored),
          f"{p.cmd}: summary {s} != {len(failed)} failed, {len(unstored)} not stored")
    check((p.returncode == 0) == (not failed), f"{p.cmd}: exit {p.returncode} with {len(failed)} failed")
    return unstored


def t_prewarm_not_stored(t):
    """An item whose entry could not be stored fails (issue 15, item 5).
    A directory planted at one entry's path (root or not, any file system):
    that item fails with CKJIT_ERROR_CACHE, exit 1, the summary counts it,
    every item reported compiled or cached is on disk; text output too."""
    arch = t.archs[0]
    probe = items_by_pair(t.prewarm(os.path.join(t.work, "probe-keys"), SPECS, archs=[arch]))
    key = probe[(SPECS[0], arch)]["key"]
    d = os.path.join(t.work, "planted")
    os.makedirs(os.path.join(d, key[:2], key + ".ckjit"), mode=0o700)
    os.chmod(d, 0o700)
    os.chmod(os.path.join(d, key[:2]), 0o700)
    for json_out in (True, False):
        p = t.prewarm(d, SPECS, archs=[arch], expect=1, json_out=json_out)
        check("not stored" in p.stderr and key in p.stderr,
              f"{p.cmd}: the failure and its key are not on stderr:\n{p.stderr[-3000:]}")
        if not json_out:
            check(re.search(r"failed [1-9]", p.stdout) and "not stored" in p.stdout,
                  f"{p.cmd}: the summary does not count the item not stored:\n{p.stdout}")
            continue
        unstored = check_honest(p, d)
        check((SPECS[0], arch) in {(it["spec"], it["arch"]) for it in unstored},
              f"{p.cmd}: the planted entry's item did not fail as not stored: {p.json['items']}")
    check(os.path.isdir(os.path.join(d, key[:2], key + ".ckjit")), "the planted directory was replaced")


def t_prewarm_full_disk(t):
    """A real full disk: a small tmpfs.  Items that did not fit fail, the
    exit status is 1, and a second run compiles only those, and fails again.
    Mounting needs root: without it this part says so and passes (the
    planted directory above covers every user), rather than marking the
    whole test skipped."""
    mnt = os.path.join(t.work, "tmpfs")
    os.makedirs(mnt)
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", mnt],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:
        r = subprocess.CompletedProcess([], 1, stdout=str(e))
    if r.returncode != 0:
        print(f"note: full disk not tried: cannot mount a tmpfs: {r.stdout.strip()}")
        return
    try:
        d = os.path.join(mnt, "cache")
        specs = [f"elementwise:dtype={dt},op={op}" for dt in ("f32", "f16", "bf16")
                 for op in ("relu", "silu", "sigmoid")] + [f"transpose:dtype={dt}" for dt in ("f32", "f16", "bf16")]
        p = t.prewarm(d, specs, expect=None)
        unstored = check_honest(p, d)
        check(unstored, f"{p.cmd}: a 64 KiB cache held all {len(p.json['items'])} entries; the test proves nothing")
        check(p.returncode == 1, f"{p.cmd}: exit {p.returncode} on a full disk")
        p2 = t.prewarm(d, specs, expect=None)
        unstored2 = check_honest(p2, d)
        s = summary(p2)
        check(s["cached"] == len(p.json["items"]) - len(unstored) and len(unstored2) == len(unstored),
              f"second run on the full disk: {s}, first run left {len(unstored)} not stored")
    finally:
        subprocess.run(["umount", "-l", mnt])


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


def parse_json_p(p):
    p.json = parse_json(p)
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True)
    ap.add_argument("--prewarm", required=True)
    ap.add_argument("--inspect")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ckjit-tools-")
    t = Tools(args, work)
    results = []

    def part(name, fn, *a):
        try:
            r = fn(t, *a)
            results.append((name, "ok", ""))
            print(f"ok    {name}", flush=True)
            return r
        except Skip as e:
            results.append((name, "skip", str(e)))
            print(f"SKIP  {name}: {e}", flush=True)
        except Failure as e:
            results.append((name, "FAIL", str(e)))
            print(f"FAIL  {name}: {e}", flush=True)
        except Exception:  # a crash of the test itself, or a tool's odd output
            results.append((name, "FAIL", traceback.format_exc()))
            print(f"FAIL  {name}:\n{traceback.format_exc()}", flush=True)
        return None

    try:
        # Which compilers are here?
        for arch in ("sm_90", "gfx90a"):
            p = t.prewarm(os.path.join(work, "probe-" + arch), SPECS[:1], archs=[arch], expect=None)
            if p.returncode == 0:
                t.archs.append(arch)
            else:
                print(f"note: no {arch}: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
        if not t.archs:
            print("SKIP: neither NVRTC (sm_90) nor hipRTC (gfx90a) can compile here")
            return 77
        print(f"archs: {', '.join(t.archs)}")
        part("help and usage errors", t_help_and_usage)
        part("tools on a missing cache", t_empty_cache)
        r = part("prewarm twice (second compiles nothing)", t_prewarm_twice)
        if r:
            d, first = r
            part("info / ls / verify", t_info_ls_verify, d, first)
            r2 = part("verify finds and --fix removes bad entries", t_verify_fix, d)
            if r2:
                part("clear", t_clear, d, *r2)
        part("prewarm with a bad spec and a bad arch", t_bad_spec_and_arch)
        part("export -> clear -> import -> verify", t_export_import)
        part("prune", t_prune)
        part("prewarm -j", t_parallel_prewarm)
        part("three prewarms into one cache at once", t_concurrent_prewarms)
        part("prewarm --manifest", t_manifest)
        part("a CKJIT_RECORD file replayed with --manifest", t_record_replay)
        part("prewarm with the arch from CKJIT_ARCH (no --arch)", t_prewarm_configured_arch)
        part("prewarm fails an item whose entry was not stored", t_prewarm_not_stored)
        part("prewarm on a full disk (tmpfs)", t_prewarm_full_disk)
        part("ckjit-inspect", t_inspect)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    failed = [r for r in results if r[1] == "FAIL"]
    skipped = [r for r in results if r[1] == "skip"]
    print(f"{len(results) - len(failed) - len(skipped)} ok, {len(failed)} failed, {len(skipped)} skipped")
    for name, _, why in skipped:
        print(f"SKIP: {name}: {why}")
    if failed:
        return 1
    return 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
