#!/usr/bin/env python3
"""The mutants: every known race and promise break, brought back on purpose (tests/model/mutants/).

A mutant is one file, NAME.mutant: header lines `Key: value`, a blank line, then a unified diff
(as `git diff` prints it) that re-introduces the bug into the tree; a mutant of the explorer's
gateway steps alone may have no diff and an `Explorer:` line instead. tests/model/mutants/README.md
lists the keys and the mutants.

    mutants.py --build BUILD [--only NAME,...] [--search-only] [--keep-going]

copies the tree into BUILD/mutants/src (only the files that changed since the last copy are
written, so the build there stays incremental), and for each mutant: applies its diff, builds the
reconciler and the scripts in BUILD/mutants/build (and the gateway or the writer, for a mutant of
it: its calls check runs first, gateway_calls.py or writer_calls.py; a mutant of deploy/sql is
loaded into the stack's database with deploy/migrate, and the tree's SQL again after it), runs the
explorer's bounded run on it (explorer.py --mutant NAME --first-failure: its saved cases and its
aimed searches first, then everything else the bounded run does), takes the diff back out, and says whether the run failed,
where, and on which broken promise. It ends with `mutation score: K of N`. Exit status 0 when every
mutant not marked `Missed:` was caught (and none marked so was), 1 otherwise, 2 on a mutant that
no longer applies or builds.

--search-only leaves the saved cases out: the score of the search alone (by hand: see the README).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
KEYS = ("Title", "Promise", "Reverts", "Test", "Class", "Explorer", "Aim", "Cases", "Missed")


class Mutant:
    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)[:-len(".mutant")]
        self.head = {}
        self.aims = []
        text = open(path).read()
        head, _, self.diff = text.partition("\n\n")
        for n, line in enumerate(head.rstrip("\n").split("\n"), 1):
            key, sep, value = line.partition(":")
            if not sep or key not in KEYS:
                raise SystemExit("%s:%d: not a 'Key: value' line of %s" % (path, n, ", ".join(KEYS)))
            if key == "Aim":
                self.aims.append(value.strip())
            else:
                self.head[key] = (self.head.get(key, "") + " " + value.strip()).strip()
        if "Title" not in self.head:
            raise SystemExit("%s: no Title:" % path)
        if self.diff.strip() and not self.diff.lstrip().startswith("diff "):
            raise SystemExit("%s: the text after the header is not a diff" % path)

    def files(self):
        """The files the diff changes."""
        return re.findall(r"^\+\+\+ b/(\S+)", self.diff, re.M)


def load(folder):
    """Every mutant of folder, by name."""
    if not os.path.isdir(folder):
        return []
    return [Mutant(os.path.join(folder, f)) for f in sorted(os.listdir(folder))
            if f.endswith(".mutant")]


def aims(folder):
    """The aimed searches of every mutant: [(mutant names, spec)], each spec once."""
    out = {}
    for m in load(folder):
        for spec in m.aims:
            out.setdefault(spec, []).append(m.name)
    return [(names, spec) for spec, names in out.items()]


def cases(folder, name):
    """The saved cases a mutant names (its Cases: line)."""
    for m in load(folder):
        if m.name == name:
            return m.head.get("Cases", "").split()
    return []


# ---------------------------------------------------------------------------
# The run.

def tree_files():
    """The tree's files to copy: what git tracks plus what it would (untracked, not ignored),
    or, outside a checkout, everything but builds, stacks and caches."""
    try:
        out = subprocess.run(["git", "-C", REPO, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True, check=True).stdout
        return [f for f in out.decode().split("\0") if f and os.path.isfile(os.path.join(REPO, f))]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for root, dirs, names in os.walk(REPO):
            rel = os.path.relpath(root, REPO)
            dirs[:] = [d for d in dirs if not (rel == "." and (d.startswith("build") or
                                                                 d.startswith(".")))]
            files += [os.path.normpath(os.path.join(rel, n)) for n in names]
        return files


def sync_tree(src):
    """Copies the tree into src, writing only the files whose bytes differ (their times move, so
    the mutants' build recompiles just what changed) and removing what the tree no longer has."""
    want = set(tree_files())
    written = 0
    for f in want:
        a, b = os.path.join(REPO, f), os.path.join(src, f)
        data = open(a, "rb").read()
        try:
            if open(b, "rb").read() == data:
                continue
        except OSError:
            os.makedirs(os.path.dirname(b), exist_ok=True)
        with open(b, "wb") as out:
            out.write(data)
        shutil.copymode(a, b)
        written += 1
    for root, _, names in os.walk(src):
        for n in names:
            rel = os.path.relpath(os.path.join(root, n), src)
            if rel not in want:
                os.unlink(os.path.join(root, n))
    return written


def sh(cmd, log, **kw):
    """Runs cmd with its output appended to log; returns its exit status."""
    with open(log, "a") as f:
        f.write("$ %s\n" % " ".join(cmd))
        f.flush()
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, **kw).returncode


def build(src, bdir, log, gateway=False, writer=False):
    """The reconciler and the scripts the explorer runs (and the gateway or the writer, for a
    mutant of it), from src, in bdir (made the first time, with the fault points the explorer
    needs)."""
    if not os.path.isfile(os.path.join(bdir, "build.ninja")):
        rc = sh(["meson", "setup", bdir, src, "-Dwerror=true", "-Dbuildtype=debugoptimized",
                 "-Dfault_points=true"], log)
        if rc:
            return rc
    return sh(["meson", "compile", "-C", bdir, "voucher-reconciler"] +
              (["voucher-gateway"] if gateway else []) + (["voucher-writer"] if writer else []),
              log)


def migrate(src, log):
    """deploy/migrate with src's deploy/sql on the stack's database (VOUCHER_PG_DSN): it loads
    functions.sql again whenever the file differs from the one the database last loaded."""
    return sh([os.path.join(REPO, "deploy", "migrate"), os.environ["VOUCHER_PG_DSN"]], log,
              env=dict(os.environ, VOUCHER_SQL_DIR=os.path.join(src, "deploy", "sql")))


VERDICT = re.compile(r"^(replay (\S+): FAILED \[([^:\]]+)|== (.+) found \[([^:\]]+))", re.M)



def run_logged(cmd, log, timeout):
    """Runs cmd in this folder, appending the command line and its output to log; returns the
    output as text and the exit status."""
    with open(log, "a") as f:
        f.write("$ %s\n" % " ".join(cmd))
        f.flush()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=HERE,
                              timeout=timeout)
        out = proc.stdout.decode(errors="replace")
        f.write(out)
    return out, proc.returncode

def run_one(m, a, src, bdir, logdir):
    """Applies m, builds, runs the explorer on it, takes m back out. Returns (caught, where, cls,
    seconds, problem)."""
    log = os.path.join(logdir, m.name + ".log")
    open(log, "w").close()
    t0 = time.time()
    patch = ["patch", "-p1", "-s", "-d", src, "--no-backup-if-mismatch", "-i", m.path]
    applied = False
    try:
        if m.diff.strip():
            if sh(patch + ["--dry-run"], log) != 0:
                return False, None, None, time.time() - t0, "its diff no longer applies (%s)" % log
            sh(patch, log)
            applied = True
        gateway = any(f.startswith("gateway/") for f in m.files())
        writer = any(f.startswith("writer/") for f in m.files())
        if build(src, bdir, log, gateway, writer) != 0:
            return False, None, None, time.time() - t0, "the mutant does not build (%s)" % log
        # A mutant of the SQL (a direct voucher's functions, deploy/sql/functions.sql) runs in
        # the stack's database: its functions replace the tree's there until it is taken out.
        sql = any(f.startswith("deploy/sql/") for f in m.files())
        if sql and migrate(src, log) != 0:
            return False, None, None, time.time() - t0, "its SQL does not load (%s)" % log
        # The explorer's gateway steps and its writer (explorer.Writer) are Python: a mutant of
        # the C gateway or writer is caught, if at all, where the two are compared
        # (gateway_calls.py, writer_calls.py), before the explorer runs.
        for changed, what in ((gateway, "gateway"), (writer, "writer")):
            if not changed:
                continue
            cmd = [a.python, os.path.join(HERE, what + "_calls.py"), "--build", bdir]
            diff = re.search(r"^DIFFERENT (.+?):?$", run_logged(cmd, log, a.timeout)[0], re.M)
            if diff:
                return True, "the %s calls check (%s)" % (what, diff.group(1)), \
                    what + "-calls", time.time() - t0, None
        cmd = [a.python, os.path.join(HERE, "explorer.py"), "--build", bdir, "--shim", a.shim,
               "--mutant", m.name, "--first-failure"] + \
            (["--no-replays"] if a.search_only else []) + m.head.get("Explorer", "").split() + \
            a.explorer_args
        out, status = run_logged(cmd, log, a.timeout)
        v = VERDICT.search(out)
        if v:
            where = "saved case %s" % v.group(2) if v.group(2) else v.group(4)
            return True, where, v.group(3) or v.group(5), time.time() - t0, None
        if status != 0:
            return False, None, None, time.time() - t0, \
                "the explorer failed without a broken promise (exit %d, %s)" % (status, log)
        return False, None, None, time.time() - t0, None
    except subprocess.TimeoutExpired:
        return False, None, None, time.time() - t0, "timed out after %d s" % a.timeout
    finally:
        if applied:
            sh(patch + ["-R"], log)
            if any(f.startswith("deploy/sql/") for f in m.files()) and migrate(src, log) != 0:
                raise SystemExit("mutants: the tree's functions.sql did not load again after %s"
                                 " (%s): the stack runs the mutant's" % (m.name, log))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="the main build (its clock shim, its venv)")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--only", default=None, help="these mutants only, comma-separated")
    ap.add_argument("--search-only", action="store_true",
                    help="no saved cases: what the search alone catches")
    ap.add_argument("--timeout", type=int, default=900, help="seconds one mutant's run may take")
    ap.add_argument("explorer_args", nargs="*", help="more options for explorer.py (after --)")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    a.shim = os.path.join(a.build, "tests", "model", "libexplorer_clock.so")
    work = os.path.join(a.build, "mutants")
    src, bdir, logdir = (os.path.join(work, d) for d in ("src", "build", "logs"))
    os.makedirs(logdir, exist_ok=True)
    all_ = load(os.path.join(HERE, "mutants"))
    chosen = [m for m in all_ if not a.only or m.name in a.only.split(",")]
    if a.only and len(chosen) != len(a.only.split(",")):
        raise SystemExit("mutants: no such mutant among %s" % ", ".join(m.name for m in all_))
    t0 = time.time()
    n = sync_tree(src)
    print("== mutants: %d (%s); the tree copied to %s (%d files written); %s" % (
        len(chosen), "the search alone" if a.search_only else "saved cases and search",
        src, n, "logs in " + logdir))
    sys.stdout.flush()
    caught, results, broken = 0, [], 0
    for m in chosen:
        ok, where, cls, secs, problem = run_one(m, a, src, bdir, logdir)
        expected_miss = m.head.get("Missed")
        if problem and ("apply" in problem or "build" in problem):
            broken += 1
        if ok:
            caught += 1
            line = "caught by %s [%s] in %.0f s" % (where, cls, secs)
            if expected_miss:
                line += " (marked Missed: take the mark out)"
        else:
            line = "MISSED in %.0f s%s%s" % (secs, ": " + problem if problem else "",
                                            " (known: %s)" % expected_miss if expected_miss else "")
        results.append((m, ok, line))
        print("mutant %-36s %s" % (m.name, line))
        sys.stdout.flush()
    print("\nmutation score: %d of %d%s (%.0f s)" % (
        caught, len(chosen), " (the search alone, no saved cases)" if a.search_only else "",
        time.time() - t0))
    missed = [m.name for m, ok, _ in results if not ok and not m.head.get("Missed")]
    stale = [m.name for m, ok, _ in results if ok and m.head.get("Missed")]
    if broken:
        return 2
    if missed and not a.search_only:
        print("missed, not marked Missed: " + ", ".join(missed))
        return 1
    if stale and not a.search_only:
        print("caught, but marked Missed: " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
