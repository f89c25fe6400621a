"""bench_embodied_report.py — the page that `make bench-embodied` writes.

Runs bench/bench_embodied_report.py on run directories written here the way
bench/bench_embodied.sh leaves them (metrics.jsonl, .log, .wall, .commit,
env.txt; a two-task manifest), with per-method seeds (`name:steps:every:seeds`):
  * one seed: the table's before/after/gain/best/wall and the bench lines;
  * two seeds: mean ± sample std, the lowest gain, the gain over `anchor`
    paired by seed (only the seeds both ran, named), the per-task means,
    the curve of each seed, and the target read on every seed;
  * the text outside the bench-embodied markers is kept;
  * sample efficiency (issue 43): embodied_sample_efficiency.json beside the
    page holds each run's success against rollout/env_steps_total and the
    training seconds and the mean over seeds; runs without the env-steps
    metric (older runs) are named and kept for the seconds panel; the PNG is
    drawn with the first python that has matplotlib (/usr/bin/python3,
    build/venv-ref, build/venv-libero: what bench_embodied.sh picks), and a
    python without it writes the page and the JSON and says so;
  * a missing run, a malformed spec and a method listed twice are errors
    that name the problem, and write nothing.
Exit 0 = pass.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "bench_embodied_report.py")


def write_run(d, name, evals, step_s=2.0, wall=100.0, log_ema=True, env_steps=None):
    """evals: [(step, success, [task0, task1])]; a training row between evaluations,
    with rollout/env_steps = env_steps (None: an older run without the metric)."""
    os.makedirs(os.path.join(d, name))
    rows, total = [], 0
    for k, (step, succ, tasks) in enumerate(evals):
        if k:
            rows.append({"step": step, "timing_s/step": step_s, "timing_s/rollout": step_s / 2,
                         "timing_s/update_actor": step_s / 4})
            if env_steps is not None:
                total += env_steps
                rows[-1].update({"rollout/env_steps": env_steps, "rollout/env_steps_total": total})
        rows.append({"step": step, "eval/success_rate": succ, "eval/episodes": 20,
                     "eval/success_task_0": tasks[0], "eval/success_task_1": tasks[1], "timing_s/eval": 1.0})
    with open(os.path.join(d, name, "metrics.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    with open(os.path.join(d, name + ".log"), "w") as f:
        f.write("step 0 evaluation (EMA weights): success\n" if log_ema else "step 0 evaluation: success\n")
    with open(os.path.join(d, name + ".wall"), "w") as f:
        f.write("%r\n" % wall)
    with open(os.path.join(d, name + ".commit"), "w") as f:
        f.write("abc1234\n")


def report(d, manifest, out, methods, seeds="1", python=sys.executable):
    return subprocess.run([python, SCRIPT, "--dir", d, "--manifest", manifest, "--methods", methods,
                           "--seeds", seeds, "--steps", "20", "--per", "10", "--every", "5",
                           "--warmstart", "ws/final", "--out", out], capture_output=True, text=True)


def row(page, method):
    for line in page.splitlines():
        if line.startswith("| %s |" % method):
            return [c.strip() for c in line.strip("|").split("|")]
    raise AssertionError("no table row for %s in:\n%s" % (method, page))


def has_matplotlib(python):
    return os.access(python, os.X_OK) and subprocess.run(
        [python, "-c", "import matplotlib"], capture_output=True).returncode == 0


def plot_python():
    """The first python with matplotlib, in bench_embodied.sh's order (None: none)."""
    venv = os.environ.get("LIBERO_VENV", "build/venv-libero")
    for p in (sys.executable, os.path.join(ROOT, "build/venv-ref/bin/python"),
              os.path.join(ROOT, venv, "bin/python")):
        if has_matplotlib(p):
            return p
    return None


def png_size(path):
    """(width, height) of a PNG, from its IHDR chunk."""
    raw = open(path, "rb").read(32)
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and raw[12:16] == b"IHDR", raw
    return struct.unpack(">II", raw[16:24])


def bench_lines(stderr):
    return {l.split()[1]: float(l.split("=")[1]) for l in stderr.splitlines() if l.startswith("bench: ")}


def main():
    d = tempfile.mkdtemp(prefix="rl-bench-report-")
    try:
        check(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def check(d):
    manifest = os.path.join(d, "manifest.json")
    json.dump({"tasks": [{"language": "pick up the milk"}, {"language": "pick up the soup"}]}, open(manifest, "w"))
    open(os.path.join(d, "env.txt"), "w").write("date_utc=2026-11-26T00:00:00Z\ncommit=abc1234\ncpu=test\n"
                                               "loadavg_start=1 1 1\nloadavg_end=2 2 2\n")
    write_run(d, "anchor", [(0, 0.40, [0.4, 0.4]), (10, 0.60, [0.5, 0.7])], wall=300)
    write_run(d, "sar", [(0, 0.40, [0.4, 0.4]), (5, 0.70, [0.7, 0.7]), (10, 0.65, [0.6, 0.7])], wall=400)
    write_run(d, "sar-s2", [(0, 0.42, [0.4, 0.44]), (5, 0.60, [0.6, 0.6]), (10, 0.72, [0.8, 0.64])], wall=500)
    out = os.path.join(d, "RESULTS.md")
    open(out, "w").write("# Results\n\nkept above\n\n<!-- bench-embodied:begin -->\nold\n"
                         "<!-- bench-embodied:end -->\n\nkept below\n")

    # one seed each
    r = report(d, manifest, out, "sar:10:5 anchor:10:10")
    assert r.returncode == 0, r.stderr
    page = open(out).read()
    assert page.startswith("# Results\n\nkept above\n") and page.rstrip().endswith("kept below"), page
    assert "old" not in page.split("<!-- bench-embodied:begin -->")[1].split("<!-- bench-embodied:end -->")[0]
    c = row(page, "sar")
    # method steps every seeds before after gain best over wall
    assert c == ["sar", "10", "5", "1", "0.400", "0.650", "+25.0", "0.700", "+5.0 (`anchor`)", "400"], c
    b = bench_lines(r.stderr)
    assert b["embodied_sar_gain_points"] == 25.0 and b["embodied_warmstart_success"] == 0.4, b
    assert "embodied_sar_gain_points_min" not in b, b
    assert "RL seed 1 (one seed per method)" in page, page
    assert "| 0 pick up the milk | 0.40 → 0.60 | 0.40 → 0.50 |" in page, page
    assert "every method at least +20 points over the warm start within 60 minutes: met (sar +25.0)" in page, page
    assert "the best method at 95% or more: **not met** (sar, final 0.650)" in page, page

    # sar on seeds 1 and 2, anchor on seed 1 only
    r = report(d, manifest, out, "sar:10:5:1,2 anchor:10:10")
    assert r.returncode == 0, r.stderr
    page = open(out).read()
    c = row(page, "sar")
    # after: 0.65, 0.72 → mean 0.685, std 0.0495; gains 25, 30 → 27.5 ± 3.5, lowest 25.0;
    # over anchor on seed 1 only: +5.0; walls 400, 500 → 450 ± 71
    assert c == ["sar", "10", "5", "1, 2", "0.410 ± 0.014", "0.685 ± 0.049", "+27.5 ± 3.5", "+25.0",
                 "0.710 ± 0.014", "+5.0 (`anchor`, seed 1)", "450 ± 71"], c
    assert row(page, "anchor")[3] == "1", row(page, "anchor")
    b = bench_lines(r.stderr)
    assert b["embodied_sar_gain_points_min"] == 25.0 and abs(b["embodied_sar_success_std"] - 0.0495) < 1e-4, b
    assert "embodied_anchor_success_std" not in b, b
    assert "- sar seed 1: 0: 0.400 (1 s), 5: 0.700 (4 s), 10: 0.650 (7 s)" in page, page
    assert "- sar seed 2: 0: 0.420 (1 s)" in page, page
    assert "| 1 pick up the soup | 0.42 → 0.67 | 0.40 → 0.70 |" in page, page
    assert "within 60 minutes on every seed: met (sar +25.0)" in page, page
    # the best method is read on its lowest seed: sar's 0.65 (seed 1), not its 0.72 (seed 2)
    assert "the best method at 95% or more on every seed: **not met** (sar, final 0.650 on its lowest seed)" in page, page

    # a method's own control (`<method>_anchor`: its example with rl_coef 0) is read in place of
    # `anchor`; controls are not methods: the targets and the best method skip them
    write_run(d, "sar_anchor", [(0, 0.40, [0.4, 0.4]), (10, 0.98, [1.0, 0.96])], wall=200)
    write_run(d, "sar_anchor-s2", [(0, 0.42, [0.4, 0.44]), (10, 0.96, [0.96, 0.96])], wall=210)
    write_run(d, "sar_mse", [(0, 0.40, [0.4, 0.4]), (10, 0.90, [0.9, 0.9])], wall=400)
    r = report(d, manifest, out, "sar:10:5:1,2 sar_mse:10:10 sar_anchor:10:10:1,2 anchor:10:10")
    assert r.returncode == 0, r.stderr
    page = open(out).read()
    # sar − sar_anchor per seed: 0.65 − 0.98, 0.72 − 0.96 → −33, −24 → −28.5 ± 6.4
    assert row(page, "sar")[9] == "-28.5 ± 6.4 (`sar_anchor`)", row(page, "sar")
    # a variant (`sar_mse`) is read against the control of the method it varies, on its seed 1: 0.90 − 0.98
    assert row(page, "sar_mse")[9] == "-8.0 (`sar_anchor`)", row(page, "sar_mse")
    assert row(page, "sar_anchor")[9] == "-" and row(page, "anchor")[9] == "-", page
    assert "within 60 minutes on every seed: met (sar +25.0, sar_mse +50.0);" in page, page
    assert "**not met** (sar_mse, final 0.900 on its lowest seed)" in page, page  # not sar_anchor's 0.96
    assert "`<method>_anchor` is a method's own control" in page, page

    # sample efficiency: sar (seeds 1, 2) with rollout/env_steps, sar_anchor and anchor without (older runs)
    for r_ in ("sar", "sar-s2"):
        shutil.rmtree(os.path.join(d, r_))
    write_run(d, "sar", [(0, 0.40, [0.4, 0.4]), (5, 0.70, [0.7, 0.7]), (10, 0.65, [0.6, 0.7])], wall=400,
              env_steps=100)
    write_run(d, "sar-s2", [(0, 0.42, [0.4, 0.44]), (5, 0.60, [0.6, 0.6]), (10, 0.72, [0.8, 0.64])], wall=500,
              step_s=3.0, env_steps=120)
    eff_json, eff_png = os.path.join(d, "embodied_sample_efficiency.json"), os.path.join(d, "embodied_sample_efficiency.png")
    no_plot = "/usr/bin/python3" if not has_matplotlib("/usr/bin/python3") else None
    for python in [p for p in (no_plot, plot_python()) if p]:
        for f in (eff_json, eff_png):
            if os.path.exists(f):
                os.remove(f)
        r = report(d, manifest, out, "sar:10:5:1,2 sar_anchor:10:10:1,2 anchor:10:10", python=python)
        assert r.returncode == 0, r.stderr
        page = open(out).read()
        e = json.load(open(eff_json))
        assert e["suite"] == "LIBERO-Object" and e["eval_episodes"] == 20 and e["episodes_per_task"] == 10, e
        sar = e["methods"]["sar"]
        assert not sar["control"] and e["methods"]["sar_anchor"]["control"], e
        # seed 1: 100 env steps and 2 s a training row; seed 2: 120 and 3 s
        assert sar["seeds"]["1"] == [{"step": 0, "env_steps": 0, "train_s": 0.0, "success": 0.40},
                                     {"step": 5, "env_steps": 100, "train_s": 2.0, "success": 0.70},
                                     {"step": 10, "env_steps": 200, "train_s": 4.0, "success": 0.65}], sar["seeds"]["1"]
        assert [p["env_steps"] for p in sar["seeds"]["2"]] == [0, 120, 240], sar["seeds"]["2"]
        mean_ = sar["mean"]
        assert [p["step"] for p in mean_] == [0, 5, 10], mean_
        assert [p["env_steps"] for p in mean_] == [0, 110, 220] and [p["train_s"] for p in mean_] == [0, 2.5, 5], mean_
        assert all(abs(p["success"] - w) < 1e-9 for p, w in zip(mean_, [0.41, 0.65, 0.685])), mean_
        # older runs: no env steps, still their seconds
        assert e["without_env_steps"] == ["sar_anchor", "sar_anchor-s2", "anchor"], e["without_env_steps"]
        assert [p["env_steps"] for p in e["methods"]["anchor"]["mean"]] == [None, None], e
        assert [p["train_s"] for p in e["methods"]["anchor"]["mean"]] == [0, 2], e
        assert "drawn against the training seconds only: sar_anchor, sar_anchor-s2, anchor." in page, page
        assert "| sar | 220 | 5 | 0.685 |" in page and "| anchor | - | 2 | 0.600 |" in page, page
        section_ = page.split("<!-- bench-embodied:begin -->")[1].split("<!-- bench-embodied:end -->")[0]
        assert "its points are in `embodied_sample_efficiency.json`" in section_ or \
            "are in `embodied_sample_efficiency.json`" in section_, section_
        if python == no_plot:
            assert not os.path.exists(eff_png), "a PNG without matplotlib"
            assert "the plot `embodied_sample_efficiency.png` was not drawn (no matplotlib in" in section_, section_
            assert "![" not in section_, section_
        else:
            w, h = png_size(eff_png)
            assert (w, h) == (1210, 484), (w, h)
            assert os.path.getsize(eff_png) > 20000, os.path.getsize(eff_png)  # two panels of lines, not blank
            assert "![sample efficiency on LIBERO-Object](embodied_sample_efficiency.png)" in section_, section_
            assert "was not drawn" not in section_, section_
    if not plot_python():
        print("no python with matplotlib (/usr/bin/python3, build/venv-ref, build/venv-libero): the PNG is not checked")

    # errors: nothing is written
    for f in (eff_json, eff_png):
        if os.path.exists(f):
            os.remove(f)
    before = open(out).read()
    for methods, want in [("sar:10:5:1,3 anchor", "sar-s3/metrics.jsonl is missing (method sar, seed 3"),
                          ("sar:10:5: anchor", "method 'sar:10:5:' is not name[:steps[:every[:seed,seed...]]]"),
                          ("sar:10:5:1,x", "is not name[:steps[:every[:seed,seed...]]]"),
                          ("sar:1:2:3:4", "is not name[:steps[:every[:seed,seed...]]]"),
                          ("sar anchor sar:10", "method 'sar' is listed twice")]:
        r = report(d, manifest, out, methods)
        assert r.returncode != 0 and want in r.stderr, (methods, r.returncode, r.stderr)
        assert open(out).read() == before, methods
        assert not os.path.exists(eff_json) and not os.path.exists(eff_png), methods
    print("bench_embodied_report: one seed, per-method seeds, own controls, sample efficiency%s, errors: ok"
          % (" (PNG by %s)" % plot_python() if plot_python() else " (no PNG: no matplotlib)"))


if __name__ == "__main__":
    main()
