#!/usr/bin/env python3
"""libero_equiv.py — LIBERO's own Python env against rlrt's C env
(rl-libero replay), step by step, from the same initial states.

Run with the LIBERO venv's python (tests/integration/libero_equiv.sh does):
    libero_equiv.py BUILD DATA [--tasks 0,3,7] [--inits 0,17] [--random-steps 60]

For every (task, init): a random action sequence (uniform in [-1.2, 1.2] so
clipping is exercised; random gripper sign) and the C expert's own actions
(rl-libero expert) are replayed through both envs. At every step we compare
qpos, qvel, the 39 proprio and 98 object observations and the success flag.
Tolerances (absolute): state (qpos, qvel) and observations 1e-6 + 1e-6*|x|,
quaternion-derived observations 2e-5 (robosuite computes them in float32:
pose2mat and mat2quat round to single precision, and its mat2quat runs a
float32 eigen-solver). The success flag must match exactly. Prints the max
deviations and exits 1 on any violation.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

STATE_TOL = 1e-6
QUAT_TOL = 2e-5


def python_run(task_id, init_state, actions):
    from libero.libero import benchmark, get_libero_path
    from libero.libero.envs.env_wrapper import ControlEnv
    suite = benchmark.get_benchmark("libero_object")(task_order_index=0)
    task = suite.get_task(task_id)
    bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
    env = ControlEnv(bddl_file_name=bddl, has_renderer=False, has_offscreen_renderer=False,
                     use_camera_obs=False)
    env.reset()
    obs = env.set_init_state(init_state)
    sim = env.env.sim
    rows = []

    def row(obs, succ):
        return np.concatenate([[sim.data.time], sim.data.qpos, sim.data.qvel,
                               obs["robot0_proprio-state"], obs["object-state"], [float(succ)]])

    rows.append(row(obs, 0))
    for a in actions:
        obs, reward, done, info = env.step(a)
        rows.append(row(obs, reward > 0))
    env.close()
    return np.array(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("data")
    ap.add_argument("--tasks", default="0,4,9")
    ap.add_argument("--inits", default="0,23")
    ap.add_argument("--random-steps", type=int, default=60)
    ap.add_argument("--expert-steps", type=int, default=300)
    args = ap.parse_args()
    tool = os.path.join(args.build, "bin", "rl-libero")
    init_all = {}
    worst = {"state": 0.0, "obs": 0.0, "quat": 0.0}
    failures = []
    tmp = tempfile.mkdtemp(prefix="rlrt-equiv-")
    for t in [int(x) for x in args.tasks.split(",")]:
        meta_dir = os.path.join(args.data, "libero_object", "task_%02d" % t)
        init = np.fromfile(os.path.join(meta_dir, "init_states.f64"), dtype="<f8").reshape(50, -1)
        nq, nv = 58, 51
        for k in [int(x) for x in args.inits.split(",")]:
            rng = np.random.default_rng(1000 * t + k)
            rand = rng.uniform(-1.2, 1.2, size=(args.random_steps, 7))
            rand[:, 6] = np.sign(rng.uniform(-1, 1, size=args.random_steps))
            ea = os.path.join(tmp, "expert_%d_%d.f64" % (t, k))
            subprocess.run([tool, "expert", "--data", args.data, "--task", str(t), "--init", str(k),
                            "--steps", str(args.expert_steps), "--actions-out", ea],
                           check=True, stdout=subprocess.DEVNULL)
            expert = np.fromfile(ea, dtype="<f8").reshape(-1, 7)
            for label, acts in (("random", rand), ("expert", expert)):
                af = os.path.join(tmp, "a.f64")
                sf = os.path.join(tmp, "s.f64")
                np.ascontiguousarray(acts, dtype="<f8").tofile(af)
                subprocess.run([tool, "replay", "--data", args.data, "--task", str(t), "--init", str(k),
                                "--actions", af, "--out", sf], check=True)
                c = np.fromfile(sf, dtype="<f8").reshape(len(acts) + 1, -1)
                p = python_run(t, init[k], acts)
                if c.shape != p.shape:
                    failures.append("task %d init %d %s: shapes %s vs %s" % (t, k, label, c.shape, p.shape))
                    continue
                st = slice(0, 1 + nq + nv)
                prop = slice(1 + nq + nv, 1 + nq + nv + 39)
                objs = slice(1 + nq + nv + 39, 1 + nq + nv + 39 + 98)
                d_state = np.abs(c[:, st] - p[:, st]) - STATE_TOL * np.abs(p[:, st])
                d_prop = np.abs(c[:, prop] - p[:, prop]) - STATE_TOL * np.abs(p[:, prop])
                obj_c, obj_p = c[:, objs].reshape(-1, 7, 14), p[:, objs].reshape(-1, 7, 14)
                plain = np.r_[0:3, 7:10]
                quat = np.r_[3:7, 10:14]
                d_obj = np.abs(obj_c[:, :, plain] - obj_p[:, :, plain]) - STATE_TOL * np.abs(obj_p[:, :, plain])
                d_q = np.abs(obj_c[:, :, quat] - obj_p[:, :, quat])
                # proprio quaternion (31:35) is MuJoCo's own xquat: plain tolerance
                ms, mo, mq = d_state.max() + 0, max(d_prop.max(), d_obj.max()), d_q.max()
                raw = np.abs(c[:, st] - p[:, st]).max()
                worst["state"] = max(worst["state"], raw)
                worst["obs"] = max(worst["obs"], max(np.abs(c[:, prop] - p[:, prop]).max(),
                                                     np.abs(obj_c[:, :, plain] - obj_p[:, :, plain]).max()))
                worst["quat"] = max(worst["quat"], mq)
                succ_c, succ_p = c[:, -1], p[:, -1]
                print("task %d init %2d %-6s %3d steps: max |dstate| %.2e  |dobs| %.2e  |dquat| %.2e  "
                      "success C %s / LIBERO %s" % (t, k, label, len(acts), raw, worst["obs"], mq,
                                                     int(succ_c.max()), int(succ_p.max())), flush=True)
                if ms > STATE_TOL:
                    i = int(np.argmax(d_state.max(axis=1)))
                    j = int(np.argmax(d_state[i]))
                    failures.append("task %d init %d %s: state column %d deviates by %.3g at step %d" %
                                    (t, k, label, j, np.abs(c[i, j] - p[i, j]), i))
                if mo > STATE_TOL:
                    failures.append("task %d init %d %s: an observation deviates by more than %g" %
                                    (t, k, label, STATE_TOL))
                if mq > QUAT_TOL:
                    failures.append("task %d init %d %s: a relative quaternion deviates by %.3g" %
                                    (t, k, label, mq))
                if not np.array_equal(succ_c, succ_p):
                    i = int(np.argmax(succ_c != succ_p))
                    failures.append("task %d init %d %s: success differs first at step %d (C %d, LIBERO %d)" %
                                    (t, k, label, i, succ_c[i], succ_p[i]))
                if label == "expert" and succ_p.max() < 1:
                    failures.append("task %d init %d: the expert's actions do not succeed in LIBERO" % (t, k))
    print("max deviations: state %.3e, observations %.3e, float32 quaternions %.3e (tolerances %g, %g)" %
          (worst["state"], worst["obs"], worst["quat"], STATE_TOL, QUAT_TOL))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("equivalent")
    return 0


if __name__ == "__main__":
    sys.exit(main())
