#!/usr/bin/env python3
"""End-to-end test of ckjit-prewarm's input and failure handling, run by
meson:

    test_prewarm_e2e.py --cache TOOL --prewarm TOOL

ckjit-prewarm run with --json, the output parsed and checked against the
cache directory (ckjit-cache verify, the files on disk): what it reports
compiled or cached must be there, and what went wrong must fail its own
item, be named, and set the exit status, so that a deployment that
prewarms its kernels learns of every kernel it will compile at run time:

  * prewarm with a bad spec and a bad arch: a clear error naming each, the
    good items still compiled, exit status 1;
  * prewarm -j N (worker processes) giving the serial run's keys;
  * three prewarms filling one empty cache at once;
  * prewarm --manifest (with a malformed line reported by line number), and
    a CKJIT_RECORD file replayed as a manifest;
  * prewarm with the arch from CKJIT_ARCH instead of --arch (it crashed);
  * prewarm failing, with exit status 1, each item whose entry was not
    stored: a directory planted at an entry's path, and a full 64 KiB tmpfs
    (root only); every item it reports compiled or cached is on disk.

ckjit-cache's subcommands and ckjit-inspect are test_tools_e2e.py; the
compiler probe, the skip rules and the helpers are tools_e2e_common.py.
"""
import json
import os
import re
import subprocess
import sys

from tools_e2e_common import (HEX32, SPECS, check, entry_files, items_by_pair, main, parse_json, parse_json_p,
                              summary)


# ---- the parts -------------------------------------------------------------


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


def run_parts(t, part):
    part("prewarm with a bad spec and a bad arch", t_bad_spec_and_arch)
    part("prewarm -j", t_parallel_prewarm)
    part("three prewarms into one cache at once", t_concurrent_prewarms)
    part("prewarm --manifest", t_manifest)
    part("a CKJIT_RECORD file replayed with --manifest", t_record_replay)
    part("prewarm with the arch from CKJIT_ARCH (no --arch)", t_prewarm_configured_arch)
    part("prewarm fails an item whose entry was not stored", t_prewarm_not_stored)
    part("prewarm on a full disk (tmpfs)", t_prewarm_full_disk)


if __name__ == "__main__":
    sys.exit(main(run_parts))
