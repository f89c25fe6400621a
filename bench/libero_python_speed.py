#!/usr/bin/env python3
"""libero_python_speed.py ACTIONS — LIBERO's own Python env (robosuite 1.4,
state only, no cameras) on task 0 from initial state 0, stepping the
(300, 7) float64 actions bench_env wrote; prints steps/s (best of 3), the
load time and the reset + set_init_state time. Steps/s are per CPU second of
this thread (as bench_env measures the C env), wall-clock figures beside.
Run by bench/bench_env.sh with the LIBERO venv and one thread for numpy."""
import os
import sys
import time

import numpy as np
from libero.libero import benchmark, get_libero_path
from libero.libero.envs.env_wrapper import ControlEnv

acts = np.fromfile(sys.argv[1], dtype="<f8").reshape(-1, 7)
suite = benchmark.get_benchmark("libero_object")(task_order_index=0)
task = suite.get_task(0)
bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
t0 = time.perf_counter()
env = ControlEnv(bddl_file_name=bddl, has_renderer=False, has_offscreen_renderer=False, use_camera_obs=False)
env.reset()
load = time.perf_counter() - t0
init = suite.get_task_init_states(0)
best, best_wall, reset_s = 0.0, 0.0, 0.0
for rep in range(3):
    t0 = time.perf_counter()
    env.reset()
    env.set_init_state(init[0])
    reset_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.thread_time()
    for a in acts:
        env.step(a)
    best = max(best, len(acts) / (time.thread_time() - c0))
    best_wall = max(best_wall, len(acts) / (time.perf_counter() - t0))
print("py_steps_per_s = %.2f" % best)
print("py_steps_per_wall_s = %.2f" % best_wall)
print("py_load_s = %.2f" % load)
print("py_reset_s = %.3f" % reset_s)
