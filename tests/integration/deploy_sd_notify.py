#!/usr/bin/env python3
"""sd_notify as systemd sees it: rl-worker and rl-driver run with
NOTIFY_SOCKET pointing at a datagram socket of this test (what systemd
gives a Type=notify unit) and WATCHDOG_USEC set (WatchdogSec=). The worker
says READY=1 once its loop runs, WATCHDOG=1 about three times per watchdog
period from that loop, STOPPING=1 on SIGTERM; the driver says READY=1 only
once every worker is ready, WATCHDOG=1 while its I/O loop runs, STOPPING=1
when it shuts down; the driver's workers never write to its socket."""
import os, signal, socket, subprocess, sys, tempfile, time

build = os.environ.get("BUILD", "build")
bin_dir = os.path.join(build, "bin")


def listen(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.1)
    return s


def drain(s, until, stop=None):
    msgs = []
    while time.time() < until:
        try:
            msgs.append(s.recv(4096).decode())
        except socket.timeout:
            pass
        if stop and stop(msgs):
            break
    return msgs


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


with tempfile.TemporaryDirectory() as d:
    # the worker alone (no driver yet): READY, pings, STOPPING
    sock = listen(os.path.join(d, "w.sock"))
    env = dict(os.environ, NOTIFY_SOCKET=os.path.join(d, "w.sock"), WATCHDOG_USEC="600000")
    w = subprocess.Popen([os.path.join(bin_dir, "rl-worker"), "--role", "reward", "--driver",
                          "tcp://127.0.0.1:1", "--give-up-s", "30", "--log-level", "error"], env=env)
    msgs = drain(sock, time.time() + 2.0)
    w.send_signal(signal.SIGTERM)
    msgs += drain(sock, time.time() + 2.0, lambda m: any("STOPPING=1" in x for x in m))
    rc = w.wait(10)
    text = "\n".join(msgs)
    if "READY=1" not in text:
        fail("worker: no READY=1 in %r" % msgs)
    pings = sum(1 for m in msgs if "WATCHDOG=1" in m)
    if pings < 4:  # 2 s at one ping per 0.2 s
        fail("worker: %d WATCHDOG=1 pings in 2 s with WatchdogSec=0.6 s" % pings)
    if "STOPPING=1" not in text or rc != 0:
        fail("worker: no STOPPING=1 (%r) or exit %d" % (msgs[-3:], rc))
    print("worker: READY, %d watchdog pings in 2 s, STOPPING, exit 0" % pings)

    # the driver with its local workers
    sock2 = listen(os.path.join(d, "d.sock"))
    env = dict(os.environ, NOTIFY_SOCKET=os.path.join(d, "d.sock"), WATCHDOG_USEC="3000000")
    cluster = os.path.join(d, "cluster.yaml")
    with open(cluster, "w") as f:
        f.write("driver: {bind: 127.0.0.1, port: 5555}\n"
                "heartbeat: {interval_s: 0.2, liveness: 3}\n"
                "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                "roles: {reward: {count: 2, node: local}, actor: {count: 2, node: local},"
                " rollout: {count: 1, node: local}}\n")
    drv = subprocess.Popen([os.path.join(bin_dir, "rl-driver"), "--cluster", cluster, "--config",
                            "examples/selftest.yaml", "--bind", "tcp://127.0.0.1:*",
                            "selftest.rounds=100000", "selftest.payload_mb=1", "--log-level",
                            "warn"], env=env, stdout=subprocess.DEVNULL)
    msgs = drain(sock2, time.time() + 4.0)
    drv.send_signal(signal.SIGTERM)
    msgs += drain(sock2, time.time() + 10.0, lambda m: any("STOPPING=1" in x for x in m))
    rc = drv.wait(30)
    ready = [m for m in msgs if "READY=1" in m]
    if len(ready) != 1:
        fail("driver: %d READY=1 messages (its workers must not write to its socket): %r"
             % (len(ready), msgs[:10]))
    if "every worker is ready" not in ready[0]:
        fail("driver: READY=1 without its status: %r" % ready[0])
    pings = sum(1 for m in msgs if "WATCHDOG=1" in m)
    if pings < 5:
        fail("driver: %d WATCHDOG=1 pings in 4 s" % pings)
    if not any("STOPPING=1" in m for m in msgs) or rc != 0:
        fail("driver: no STOPPING=1 or exit %d" % rc)
    print("driver: one READY (after its workers), %d watchdog pings, STOPPING, exit 0" % pings)
