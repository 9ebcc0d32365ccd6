#!/usr/bin/env python3
"""Every command-line tool in every documented way of choosing its inputs
(issue 15, item 1: `CKJIT_ARCH=sm_90 ckjit-prewarm SPEC` died from SIGSEGV
because the tool tests always passed --arch).  Run by meson:

    test_cli_matrix.py --prewarm TOOL --cache TOOL --inspect TOOL --demo TOOL

The cells, for each tool where the input applies:

  arch       --arch A | CKJIT_ARCH=A | neither (the GPU's arch; without a
             GPU a clean usage error) | a bad arch by --arch | by CKJIT_ARCH
  cache dir  --cache-dir D | CKJIT_CACHE_DIR=D | XDG_CACHE_HOME=X (D is
             X/ckjit) | HOME=H (D is H/.cache/ckjit); every setting that
             ranks below the chosen one points at a decoy directory
  output     --json | text

In every cell: the tool is not killed by a signal; the exit status is the
expected one (0, or a clean nonzero with a message on stderr); the output
parses (JSON with --json, the tool's summary lines otherwise); the tool
read and wrote the cache directory the cell chose (one entry is removed
from each cell's copy of the seeded cache and must come back there) and
nothing else (the decoys stay empty).  Each tool's --help exits 0.

Cost is bounded by sharing compiled entries: cheap specs are prewarmed once
into a seed directory that each cell copies.  ckjit-demo has no cheap mode:
without a GPU it compiles the whole default set for its --arch list, so its
cells get a copy of a seed holding the default set for one arch (compiled
once, the longest step) and compile nothing; its archs come from --arch only
(default sm_90,gfx90a, two whole default sets), so its CKJIT_ARCH and
no-arch cells are left out.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SPECS = ["transpose:dtype=f32", "elementwise:dtype=f16,op=relu", "transpose:dtype=bf16"]
# Cheap targets, whichever compiler is present: few default specs (no
# tensor-core GEMMs), so the demo's seed compiles fastest.
ARCH_CANDIDATES = ["sm_75", "gfx90a"]
BAD_ARCH = "sm_5"
HEX32 = re.compile(r"^[0-9a-f]{32}$")
ARCH_WAYS = ["flag", "env", "none", "bad-flag", "bad-env"]
CACHE_WAYS = ["flag", "env", "xdg", "home"]
SCRUB = ("CKJIT_CACHE_DIR", "CKJIT_CACHE_DISABLE", "CKJIT_ARCH", "CKJIT_DUMP_DIR", "CKJIT_CACHE_PATH",
         "CKJIT_CACHE_MAX_SIZE", "CKJIT_CACHE_MAX_ENTRIES", "CKJIT_RECORD", "CKJIT_LOG",
         "XDG_CACHE_HOME", "HOME", "CKJIT_PREWARM_TEST_CRASH", "CKJIT_PREWARM_TEST_HANG")


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def entry_keys(cache_dir):
    """Keys of the regular entry files below cache_dir."""
    out = set()
    if not os.path.isdir(cache_dir):
        return out
    for sub in os.listdir(cache_dir):
        d = os.path.join(cache_dir, sub)
        if len(sub) != 2 or not os.path.isdir(d) or os.path.islink(d):
            continue
        for name in os.listdir(d):
            f = os.path.join(d, name)
            if name.endswith(".ckjit") and HEX32.match(name[:-6]) and os.path.isfile(f):
                out.add(name[:-6])
    return out


def files_below(d):
    return [os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs]


class Matrix:
    def __init__(self, args, work):
        self.tools = {"prewarm": args.prewarm, "cache": args.cache, "inspect": args.inspect,
                      "demo": args.demo}
        self.work = work
        self.base_env = {k: v for k, v in os.environ.items() if k not in SCRUB}
        self.cells = 0
        self.failures = []

    def run(self, argv, env, timeout=600):
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        shown = " ".join(f"{k}={v}" for k, v in sorted(env.items()) if k not in self.base_env)
        p.cmd = (shown + " " if shown else "") + " ".join(argv)
        return p

    def isolated_env(self, home):
        """No cache setting at all but a HOME of our own (never the user's)."""
        e = dict(self.base_env)
        e["HOME"] = home
        return e

    # ---- set-up ----------------------------------------------------------

    def prewarm_seed(self, seed, arch, extra):
        env = self.isolated_env(os.path.join(self.work, "seed-home"))
        argv = [self.tools["prewarm"], "--cache-dir", seed, "--arch", arch, "--json"] + extra
        p = self.run(argv, env)
        check(p.returncode == 0, f"seeding: {p.cmd}: exit {p.returncode}\n{p.stderr[-3000:]}")
        return json.loads(p.stdout)

    def set_up(self):
        os.makedirs(os.path.join(self.work, "seed-home"))
        self.arch = None
        for arch in ARCH_CANDIDATES:
            probe = os.path.join(self.work, "probe-" + arch)
            env = self.isolated_env(os.path.join(self.work, "seed-home"))
            p = self.run([self.tools["prewarm"], "--cache-dir", probe, "--arch", arch, SPECS[0]], env)
            if p.returncode == 0:
                self.arch = arch
                break
            print(f"note: no {arch}: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
        if not self.arch:
            return False
        # The arch a tool takes when given none: the GPU's, or none here.
        env = self.isolated_env(os.path.join(self.work, "seed-home"))
        p = self.run([self.tools["prewarm"], "--list", SPECS[0]], env)
        check(p.returncode >= 0, f"{p.cmd}: killed by signal {-p.returncode}")
        self.gpu_arch = p.stdout.split()[0] if p.returncode == 0 and p.stdout.strip() else None
        print(f"arch {self.arch}; without one the tools use "
              f"{self.gpu_arch or 'nothing (no GPU): a clean usage error is expected'}")
        # Seeds: the cheap specs; and for the demo the default set as well.
        self.seed = os.path.join(self.work, "seed")
        items = self.prewarm_seed(self.seed, self.arch, SPECS)["items"]
        self.keys = {it["spec"]: it["key"] for it in items}
        self.victim = self.keys[SPECS[0]]
        self.demo_seed = os.path.join(self.work, "seed-all")
        shutil.copytree(self.seed, self.demo_seed)
        t0 = time.monotonic()
        j = self.prewarm_seed(self.demo_seed, self.arch, ["--all", "-j", str(os.cpu_count() or 2)])
        print(f"demo seed: {j['summary']['compiled']} default specs compiled for {self.arch} "
              f"in {time.monotonic() - t0:.1f} s")
        return True

    # ---- one cell --------------------------------------------------------

    def cell(self, tool, arch_way, cache_way, json_out, seed=None, remove_victim=True):
        """Lays out the cell's directories (the chosen cache a copy of `seed`
        less the victim entry, the decoys empty) and returns (name, chosen
        cache directory, decoys, environment, arguments).  arch_way None: the
        tool takes no arch."""
        name = "-".join(x for x in (tool, arch_way, cache_way, "json" if json_out else "text") if x)
        root = os.path.join(self.work, "cells", name)
        decoys = {k: os.path.join(root, "decoy-" + k) for k in ("env", "xdg", "home")}
        for d in decoys.values():
            os.makedirs(d)
        env = dict(self.base_env)
        args = []
        if cache_way == "flag":
            target = os.path.join(root, "chosen")
            args += ["--cache-dir", target]
            env.update(CKJIT_CACHE_DIR=decoys["env"], XDG_CACHE_HOME=decoys["xdg"], HOME=decoys["home"])
        elif cache_way == "env":
            target = os.path.join(root, "chosen")
            env.update(CKJIT_CACHE_DIR=target, XDG_CACHE_HOME=decoys["xdg"], HOME=decoys["home"])
        elif cache_way == "xdg":
            target = os.path.join(root, "xdg", "ckjit")
            env.update(XDG_CACHE_HOME=os.path.join(root, "xdg"), HOME=decoys["home"])
        else:
            target = os.path.join(root, "home", ".cache", "ckjit")
            env.update(HOME=os.path.join(root, "home"))
        if seed:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copytree(seed, target)
            os.chmod(target, 0o700)
            if remove_victim:
                os.unlink(os.path.join(target, self.victim[:2], self.victim + ".ckjit"))
        if arch_way == "flag":
            args += ["--arch", self.arch]
        elif arch_way == "env":
            env["CKJIT_ARCH"] = self.arch
        elif arch_way == "bad-flag":
            args += ["--arch", BAD_ARCH]
        elif arch_way == "bad-env":
            env["CKJIT_ARCH"] = BAD_ARCH
        if json_out:
            args.append("--json")
        return name, target, decoys, env, args

    def finish(self, name, p, target, decoys, ok_exit, parse):
        """The checks every cell makes; `parse(p)` checks the output."""
        self.cells += 1
        try:
            check(p.returncode >= 0, f"killed by signal {-p.returncode}")
            if ok_exit:
                check(p.returncode == 0, f"exit {p.returncode}, expected 0")
            else:
                check(p.returncode != 0, "exit 0, expected a failure")
                check(p.stderr.strip(), f"exit {p.returncode} without a message on stderr")
            parse(p)
            for k, d in decoys.items():
                stray = files_below(d)
                check(not stray, f"wrote into the {k} decoy, a cache the cell did not choose: {stray[:3]}")
        except Failure as e:
            self.failures.append(name)
            print(f"FAIL  {name}: {e}\n      {p.cmd}\n      stdout: {p.stdout[-1500:]}\n"
                  f"      stderr: {p.stderr[-1500:]}", flush=True)
        except Exception as e:  # the test's own bug, or output it cannot read
            self.failures.append(name)
            print(f"FAIL  {name}: {type(e).__name__}: {e}\n      {p.cmd}\n"
                  f"      stdout: {p.stdout[-1500:]}\n      stderr: {p.stderr[-1500:]}", flush=True)

    def arch_ok(self, arch_way):
        """Whether a compile in this arch cell should succeed, and for which arch."""
        if arch_way in ("flag", "env"):
            return self.arch
        if arch_way == "none":
            return self.gpu_arch
        return None

    # ---- the tools -------------------------------------------------------

    def prewarm_cells(self):
        for arch_way in ARCH_WAYS:
            for cache_way in CACHE_WAYS:
                for json_out in (True, False):
                    name, target, decoys, env, args = self.cell("prewarm", arch_way, cache_way, json_out,
                                                                self.seed)
                    p = self.run([self.tools["prewarm"]] + args + SPECS, env)
                    arch = self.arch_ok(arch_way)

                    def parse(p, arch=arch, target=target, json_out=json_out, arch_way=arch_way):
                        on_disk = entry_keys(target)
                        if not arch:
                            if arch_way == "none":
                                check(p.returncode == 2 and "--arch" in p.stderr,
                                      "no arch and no GPU: expected exit 2 naming --arch")
                            check(BAD_ARCH in p.stderr or arch_way == "none", "the bad arch is not named")
                            if json_out and p.stdout.strip():
                                json.loads(p.stdout)
                            return
                        if json_out:
                            j = json.loads(p.stdout)
                            s = j["summary"]
                            check(s["failed"] == 0 and s["total"] == len(SPECS), f"summary {s}")
                            check(os.path.realpath(j["cache_dir"]) == os.path.realpath(target),
                                  f"cache_dir {j['cache_dir']}, the cell chose {target}")
                            for it in j["items"]:
                                check(it["arch"] == arch and it["key"] in on_disk,
                                      f"item {it} is not in {target}")
                            if arch == self.arch:
                                check(s["compiled"] == 1 and s["cached"] == len(SPECS) - 1,
                                      f"summary {s}: expected the removed entry compiled, the rest cached")
                        else:
                            check(re.search(r"^compiled \d+, already cached \d+, failed 0 of \d+", p.stdout, re.M),
                                  "no summary line")
                            check(target in p.stdout, f"the cache directory {target} is not named")
                        if arch == self.arch:
                            check(self.victim in on_disk, f"the removed entry did not come back in {target}")
                    self.finish(name, p, target, decoys, bool(arch), parse)

    def inspect_cells(self):
        for arch_way in ARCH_WAYS:
            for cache_way in CACHE_WAYS:
                for json_out in (True, False):
                    name, target, decoys, env, args = self.cell("inspect", arch_way, cache_way, json_out,
                                                                self.seed)
                    p = self.run([self.tools["inspect"]] + args + SPECS[:2], env)
                    arch = self.arch_ok(arch_way)

                    def parse(p, arch=arch, target=target, json_out=json_out):
                        if not arch:
                            if json_out and p.stdout.strip():
                                json.loads(p.stdout)
                            return
                        on_disk = entry_keys(target)
                        if json_out:
                            j = json.loads(p.stdout)
                            check(len(j["items"]) == 2, f"{len(j['items'])} items, expected 2")
                            for it in j["items"]:
                                check(it["result"] == "ok" and it["arch"] == arch and it["key"] in on_disk
                                      and it["kernels"], f"item {it.get('spec')}: {it.get('result')}, "
                                      f"key {it.get('key')} in {target}: {it.get('key') in on_disk}")
                        else:
                            check(len(re.findall(r"^\S+ for \S+: key [0-9a-f]{32}, \d+ B code object", p.stdout,
                                                 re.M)) == 2, "not two item lines")
                            check("registers" in p.stdout, "no resource lines")
                        if arch == self.arch:
                            check(self.victim in on_disk, f"the removed entry did not come back in {target}")
                    self.finish(name, p, target, decoys, bool(arch), parse)

    def cache_cells(self):
        for command in ("info", "ls", "verify"):
            for cache_way in CACHE_WAYS:
                for json_out in (True, False):
                    name, target, decoys, env, args = self.cell("cache-" + command, None, cache_way,
                                                                json_out, self.seed, remove_victim=False)
                    p = self.run([self.tools["cache"]] + args + [command], env)
                    keys = entry_keys(target)

                    def parse(p, command=command, target=target, json_out=json_out, keys=keys):
                        if json_out:
                            j = json.loads(p.stdout)
                            if command == "info":
                                check(os.path.realpath(j["cache_dir"]) == os.path.realpath(target)
                                      and j["entries"] == len(keys), f"info: {j}")
                            elif command == "ls":
                                check({e["key"] for e in j["entries"]} == keys, f"ls: {j['entries']}")
                            else:
                                check(j["ok"] == len(keys) and j["bad_count"] == 0, f"verify: {j}")
                        else:
                            check(p.stdout.strip(), "no output")
                            if command == "info":
                                check(target in p.stdout, f"{target} is not named")
                            elif command == "ls":
                                check(all(k in p.stdout for k in keys), "not every key is listed")
                    self.finish(name, p, target, decoys, True, parse)

    def demo_cells(self):
        # On a GPU host the demo runs the ops instead (its --arch is for
        # compile-only runs) and must succeed in every cell.
        for arch_way in ("flag", "bad-flag"):
            for cache_way in CACHE_WAYS:
                for json_out in (True, False):
                    name, target, decoys, env, args = self.cell("demo", arch_way, cache_way, json_out,
                                                                self.demo_seed, remove_victim=False)
                    before = entry_keys(target)
                    p = self.run([self.tools["demo"]] + args, env)
                    ok = arch_way == "flag" or self.gpu_arch is not None

                    def parse(p, target=target, json_out=json_out, ok=ok, before=before):
                        if json_out:
                            j = json.loads(p.stdout)
                            check(j["ok"] is ok, f"ok: {j['ok']}")
                            if self.gpu_arch is None:
                                check(os.path.realpath(j["cache"]["dir"]) == os.path.realpath(target),
                                      f"cache dir {j['cache']['dir']}, the cell chose {target}")
                                s = j["prewarm"]["summary"]
                                if ok:
                                    check(s["compiled"] == 0 and s["failed"] == 0 and s["cached"] > 0,
                                          f"summary {s}: the seeded cache should serve everything")
                                else:
                                    check(s["failed"] > 0, f"summary {s}: the bad arch failed nothing")
                        elif self.gpu_arch is None:
                            if ok:
                                check(re.search(r"^nothing to compile: all \d+ already cached", p.stdout, re.M),
                                      "no 'nothing to compile' summary")
                            check(target in p.stdout, f"{target} is not named")
                        if self.gpu_arch is None:
                            check(entry_keys(target) == before, "the demo changed the seeded cache")
                    self.finish(name, p, target, decoys, ok, parse)

    def help_cells(self):
        for tool, path in self.tools.items():
            env = self.isolated_env(os.path.join(self.work, "seed-home"))
            p = self.run([path, "--help"], env)

            def parse(p):
                check("usage" in p.stdout.lower(), "no usage text on stdout")
            self.finish(f"{tool}-help", p, None, {}, True, parse)


def main():
    ap = argparse.ArgumentParser()
    for t in ("prewarm", "cache", "inspect", "demo"):
        ap.add_argument("--" + t, required=True)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ckjit-cli-matrix-")
    m = Matrix(args, work)
    t0 = time.monotonic()
    try:
        m.help_cells()
        if not m.set_up():
            print("SKIP: no compiler for " + " or ".join(ARCH_CANDIDATES) + " (NVRTC or hipRTC)")
            return 77 if not m.failures else 1
        for part in (m.prewarm_cells, m.inspect_cells, m.cache_cells, m.demo_cells):
            n, f = m.cells, len(m.failures)
            t1 = time.monotonic()
            part()
            print(f"{part.__name__}: {m.cells - n} cells, {len(m.failures) - f} failed, "
                  f"{time.monotonic() - t1:.1f} s", flush=True)
    except Failure as e:
        print(f"FAIL  set-up: {e}")
        m.failures.append("set-up")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{m.cells} cells, {len(m.failures)} failed, {time.monotonic() - t0:.1f} s")
    return 1 if m.failures else 0


if __name__ == "__main__":
    sys.exit(main())
