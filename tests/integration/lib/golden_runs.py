"""golden_runs.py — what the golden-run tests share (tests/integration/
{rlvr,embodied,diffusion}_golden.py): run a list of jobs on real daemons
with rl-driver, turn what each wrote into rows, and compare them value for
value with tests/golden/<track>/<job>.jsonl, or rewrite those (--record).

A job is a dict: name, cluster (a cluster.yaml path relative to the work
folder), config (an examples/ file), overrides, out (its output folder),
expect (files it must leave, so a job that silently skips a part fails) and
rows (out_dir -> rows; default: metrics.jsonl without the wall-clock
metrics). The kernels are pinned (OMP_NUM_THREADS=2,
OPENBLAS_CORETYPE=Haswell) so the numbers do not depend on the machine.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
DRIVER = os.path.join(BUILD, "bin", "rl-driver")
# metrics that measure the machine, not the computation
WALL_PREFIXES = ("timing_s/", "perf/")


def write_cluster(path, roles, port, extra="", node=""):
    """A one-node cluster.yaml with `roles` ({role: count}), `extra` lines
    after the driver's and `node` keys added to the node; --bind picks a free
    port at run time."""
    with open(path, "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: %d}\n%s"
                "nodes: [{name: local, address: 127.0.0.1, launch: local%s}]\n"
                "roles:\n" % (port, extra, node))
        for role, count in roles.items():
            f.write("  %s: {count: %d, node: local}\n" % (role, count))


def metrics_rows(out_dir, wall_keys=()):
    with open(os.path.join(out_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [{k: v for k, v in r.items() if not k.startswith(WALL_PREFIXES) and k not in wall_keys}
            for r in rows]


def sanitizer_build():
    with open(DRIVER, "rb") as f:
        data = f.read()
    return b"__asan_init" in data or b"__ubsan_handle" in data


def compare(name, rows, want):
    """The differences of rows from the golden rows, as messages naming the
    job, the step and the metric (empty when they are equal)."""
    if len(rows) != len(want):
        return ["%s: %d metric rows, golden has %d (steps %s, golden %s)" % (
            name, len(rows), len(want), [r.get("step") for r in rows], [r.get("step") for r in want])]
    diffs = []
    for i, (got, exp) in enumerate(zip(rows, want)):
        where = ("%s step %s (row %d)" % (name, exp["step"], i + 1) if "step" in exp
                 else "%s row %d" % (name, i + 1))
        if got.keys() != exp.keys():
            diffs.append("%s: metric names differ: missing %s, new %s" % (
                where, sorted(exp.keys() - got.keys()), sorted(got.keys() - exp.keys())))
        for k in sorted(exp.keys() & got.keys()):
            if got[k] != exp[k]:
                diffs.append("%s %s: %r, golden %r" % (where, k, got[k], exp[k]))
    return diffs


def run(track, jobs, clusters, compare_sanitized, extra_args=()):
    """Runs `jobs` (see the module's doc) in a fresh work folder after writing
    `clusters` ({file: keyword arguments of write_cluster but the path}); compares with (or, with
    --record, rewrites) tests/golden/<track>/. A sanitizer build compares only
    when compare_sanitized (its floating point may differ from the plain
    build the goldens come from: then the jobs run and the test exits 77)."""
    golden_dir = os.path.join(ROOT, "tests", "golden", track)
    record = "--record" in sys.argv[1:]
    if not os.path.exists(DRIVER):
        raise SystemExit("FAIL: %s not built" % DRIVER)
    sanitized = sanitizer_build()
    if sanitized and record:
        raise SystemExit("FAIL: record the goldens with a plain build, not %s" % DRIVER)
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_CORETYPE="Haswell")
    env.pop("RL_FAULT_INJECT", None)
    work = tempfile.mkdtemp(prefix="rlrt-%s-golden-" % track)
    failures = []
    try:
        for path, kw in clusters.items():
            write_cluster(os.path.join(work, path), **kw)
        for job in jobs:
            name = job["name"]
            cmd = [DRIVER, "--cluster", os.path.join(work, job["cluster"]),
                   "--config", os.path.join(ROOT, "examples", job["config"]),
                   "--bind", "tcp://127.0.0.1:*", "--log-level", "warn"] + list(extra_args) + job["overrides"]
            t0 = time.monotonic()
            p = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600)
            secs = time.monotonic() - t0
            if p.returncode != 0:
                print((p.stdout + p.stderr)[-4000:])
                raise SystemExit("FAIL: job %s exited %d" % (name, p.returncode))
            out_dir = os.path.join(work, job["out"])
            for f in job.get("expect", []):
                if not os.path.exists(os.path.join(out_dir, f)):
                    raise SystemExit("FAIL: job %s wrote no %s" % (name, f))
            rows = job.get("rows", metrics_rows)(out_dir)
            golden = os.path.join(golden_dir, name + ".jsonl")
            if record:
                os.makedirs(golden_dir, exist_ok=True)
                with open(golden, "w") as f:
                    for r in rows:
                        f.write(json.dumps(r, sort_keys=True) + "\n")
                print("recorded %s: %d rows (%.1f s)" % (golden, len(rows), secs))
                continue
            if sanitized and not compare_sanitized:
                print("ran %s under the sanitizers: %d rows (%.1f s)" % (name, len(rows), secs))
                continue
            with open(golden) as f:
                want = [json.loads(line) for line in f if line.strip()]
            diffs = compare(name, rows, want)
            if diffs:
                for d in diffs[:20]:
                    print("differs: " + d)
                if len(diffs) > 20:
                    print("differs: ... and %d more" % (len(diffs) - 20))
                failures.append("%s (%d difference%s; first: %s)" % (
                    name, len(diffs), "s"[:len(diffs) > 1], diffs[0]))
            else:
                print("ok: %s: %d rows equal the golden run, value for value (%.1f s)" % (
                    name, len(rows), secs))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        raise SystemExit("FAIL: " + "; ".join(failures))
    if sanitized and not compare_sanitized and not record:
        print("skipped: sanitizer build: the jobs ran clean, values not compared (its floating "
              "point differs from the plain build the goldens come from)")
        sys.exit(77)
