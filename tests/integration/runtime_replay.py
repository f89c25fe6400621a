"""runtime_replay.py — a sniffed HELLO gets nobody a slot, and no slot
secret crosses the wire of a plaintext cluster.

rl-driver advertises 127.0.0.2:PORT to its workers and binds 127.0.0.1:PORT;
a relay in this process listens on 127.0.0.2:PORT, forwards every byte to the
driver and records both directions (a sniffer on the workers' network).
While the job runs, this process (the attacker) replays every HELLO it
recorded, in order and one by one, from fresh ZeroMQ connections to the
driver. The replays get nothing of the job (never CONFIGURE or CALL): a
HELLO that proves the slot token answers a spent challenge and is refused
(ERROR + DISCONNECT), one without a proof gets a fresh CHALLENGE that is
useless without the token. The slot tokens of the workers (read from their environment) must
appear nowhere in the recorded bytes, and the real workers must keep their
slots: no reconnect, no restart, the selftest passes.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
DRIVER = os.path.join(BUILD, "bin", "rl-driver")

HELLO, CONFIGURE, READY, CALL, REPLY, ERROR, HEARTBEAT, SHUTDOWN, DISCONNECT, CHALLENGE = \
    range(10, 20)
NAMES = {10: "HELLO", 11: "CONFIGURE", 12: "READY", 13: "CALL", 14: "REPLY", 15: "ERROR",
         16: "HEARTBEAT", 17: "SHUTDOWN", 18: "DISCONNECT", 19: "CHALLENGE"}


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def varint(buf, i):
    v = shift = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def pb_fields(buf):
    """(field number, value) of a protobuf message's top level."""
    out, i = [], 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = bytes(buf[i:i + n]), i + n
        elif wt == 1:
            v, i = bytes(buf[i:i + 8]), i + 8
        elif wt == 5:
            v, i = bytes(buf[i:i + 4]), i + 4
        else:
            raise ValueError("wire type %d" % wt)
        out.append((num, v))
    return out


def body(env):
    """(kind, body bytes) of an rl.Envelope (kind: its oneof field number)."""
    try:
        for num, v in pb_fields(env):
            if num >= 10:
                return num, v
    except ValueError:
        pass
    return None, b""


def zmtp_messages(stream):
    """The message frames (commands skipped) of a recorded ZMTP 3 stream."""
    out, i = [], 64  # the greeting
    while i < len(stream):
        flags = stream[i]
        i += 1
        if flags & 0x02:
            if i + 8 > len(stream):
                break
            size = int.from_bytes(stream[i:i + 8], "big")
            i += 8
        else:
            if i >= len(stream):
                break
            size = stream[i]
            i += 1
        if i + size > len(stream):
            break
        if not flags & 0x04:
            out.append(bytes(stream[i:i + size]))
        i += size
    return out


class Relay(threading.Thread):
    """Listens on `listen`, forwards each connection to `target`, records
    both directions: conns is a list of [worker->driver, driver->worker]."""

    def __init__(self, listen, target):
        super().__init__(daemon=True)
        self.target = target
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(listen)
        self.srv.listen(64)
        self.srv.settimeout(0.2)
        self.conns = []
        self.lock = threading.Lock()
        self.stop = False

    def run(self):
        while not self.stop:
            try:
                c, _ = self.srv.accept()
            except socket.timeout:
                continue
            try:
                u = socket.create_connection(self.target)
            except OSError:
                c.close()
                continue
            rec = [bytearray(), bytearray()]
            with self.lock:
                self.conns.append(rec)
            threading.Thread(target=self.pump, args=(c, u, rec[0]), daemon=True).start()
            threading.Thread(target=self.pump, args=(u, c, rec[1]), daemon=True).start()

    def pump(self, a, b, rec):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                with self.lock:
                    rec += data
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def snapshot(self):
        with self.lock:
            return [(bytes(u), bytes(d)) for u, d in self.conns]


def replay(zmq, endpoint, frames):
    """Sends `frames` (envelope bytes) from a fresh DEALER, one after the
    other, each followed by whatever the driver answers within 1.5 s;
    returns the kinds and error texts received."""
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    got = []
    for f in frames:
        s.send(f)
        deadline = time.time() + 1.5
        while time.time() < deadline:
            if not s.poll(100):
                continue
            parts = s.recv_multipart()
            kind, b = body(parts[0])
            text = ""
            if kind == ERROR:
                text = dict(pb_fields(b)).get(3, b"").decode("utf-8", "replace")
            got.append((kind, text))
    s.close()
    ctx.term()
    return got


def main():
    try:
        import zmq
    except ImportError:
        print("python3-zmq not installed (deploy/install-deps.sh installs it)")
        return 77
    if not os.access(DRIVER, os.X_OK):
        fail(DRIVER + " not built")
    d = tempfile.mkdtemp(prefix="rlrt-replay.")
    lo = 32768
    try:
        lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except OSError:
        pass
    port = 10000 + os.getpid() % (lo - 11000 if lo > 12000 else 1000)
    with open(os.path.join(d, "cluster.yaml"), "w") as f:
        # local_ipc false: the local workers must take the sniffed TCP path
        f.write("driver: {bind: 127.0.0.1, address: 127.0.0.2, port: %d, local_ipc: false}\n"
                "heartbeat: {interval_s: 0.2, liveness: 5}\n"
                "restart: {max_restarts: 3, backoff_s: 0.2}\n"
                "nodes: [{name: local, address: 127.0.0.1, launch: local}]\n"
                "roles:\n  reward: {count: 2, node: local}\n" % port)
    relay = Relay(("127.0.0.2", port), ("127.0.0.1", port))
    relay.start()
    log = open(os.path.join(d, "log"), "w+")
    drv = subprocess.Popen([DRIVER, "--cluster", os.path.join(d, "cluster.yaml"), "--config",
                            os.path.join(ROOT, "examples", "selftest.yaml"),
                            "selftest.rounds=100000", "selftest.payload_mb=1",
                            "selftest.sleep_ms=20"],
                           cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        return run(zmq, d, port, relay, drv, log)
    finally:
        if drv.poll() is None:
            drv.kill()
            drv.wait()
        relay.stop = True
        subprocess.run(["rm", "-rf", d])


def text_of(log):
    log.flush()
    log.seek(0)
    return log.read()


def run(zmq, d, port, relay, drv, log):
    for _ in range(300):
        if "running selftest" in text_of(log):
            break
        if drv.poll() is not None:
            break
        time.sleep(0.1)
    if "running selftest" not in text_of(log):
        print(text_of(log)[-3000:])
        fail("the driver did not start through the relay")
    workers = subprocess.run(["pgrep", "-P", str(drv.pid)], capture_output=True,
                             text=True).stdout.split()
    if len(workers) != 2:
        fail("expected 2 workers, got %s" % workers)
    tokens = []
    for pid in workers:
        with open("/proc/%s/environ" % pid, "rb") as f:
            for var in f.read().split(b"\0"):
                if var.startswith(b"RL_WORKER_TOKEN="):
                    tokens.append(var[len(b"RL_WORKER_TOKEN="):])
    if len(tokens) != 2 or not all(tokens):
        fail("could not read the workers' slot tokens from their environment")
    time.sleep(1.0)  # a few heartbeats and calls on the wire

    conns = relay.snapshot()
    hellos = []
    for up, _ in conns:
        h = [m for m in zmtp_messages(up) if body(m)[0] == HELLO]
        if h:
            hellos.append(h)
    if len(hellos) != 2:
        fail("the relay saw HELLOs on %d connections, expected 2" % len(hellos))
    # 1. the token is no secret any more once it crosses the wire in clear
    for up, down in conns:
        for t in tokens:
            if t in up or t in down:
                fail("a slot token (%s...) travels in clear text (%s)" %
                     (t[:8].decode(), "worker -> driver" if t in up else "driver -> worker"))
    print("replay: no slot token in %d recorded connections (%d bytes)" %
          (len(conns), sum(len(u) + len(dn) for u, dn in conns)))

    # 2. replay each worker's HELLOs: in order on one connection, then each alone
    endpoint = "tcp://127.0.0.1:%d" % port
    tries = []
    for h in hellos:
        tries.append(h)
        tries.extend([m] for m in h)
    for frames in tries:
        got = replay(zmq, endpoint, frames)
        kinds = [NAMES.get(k, str(k)) for k, _ in got]
        print("replay of %d HELLO(s): %s" % (len(frames), " ".join(kinds) or "(nothing)"))
        for k, _ in got:
            if k in (CONFIGURE, CALL):
                fail("a replayed HELLO got %s: %s" % (NAMES[k], kinds))
            if k not in (CHALLENGE, ERROR, DISCONNECT):
                fail("a replayed HELLO got %s: %s" % (NAMES.get(k, str(k)), kinds))
        # a HELLO with a proof of the slot token answers a spent challenge:
        # refused; one without gets a fresh CHALLENGE, useless without the
        # token
        with_proof = any(num == 13 for num, _ in pb_fields(body(frames[-1])[1]))
        refused = [t for k, t in got if k == ERROR]
        if with_proof or refused:
            if not refused or "refused" not in refused[-1] or got[-1][0] != DISCONNECT:
                fail("a replayed HELLO was not refused with ERROR + DISCONNECT: %s" % got)
            print("  refused: %s" % refused[-1])
        elif not got or got[-1][0] != CHALLENGE:
            fail("a replayed HELLO without a proof got %s, expected a CHALLENGE" % kinds)

    # 3. the real workers keep their slots: calls go on, nothing restarts
    time.sleep(1.5)
    if drv.poll() is not None:
        print(text_of(log)[-3000:])
        fail("the driver exited %s during the replays" % drv.returncode)
    for pid in workers:
        if not os.path.exists("/proc/%s" % pid):
            fail("worker %s is gone" % pid)
    log_text = text_of(log)
    for bad in ("reconnected", "restarting", "missed heartbeats", "exited with"):
        if bad in log_text:
            print(log_text[-3000:])
            fail("the job was disturbed: '%s' in the driver's log" % bad)
    drv.send_signal(signal.SIGTERM)
    try:
        drv.wait(30)
    except subprocess.TimeoutExpired:
        fail("the driver did not stop on SIGTERM")
    log_text = text_of(log)
    bad = [ln for ln in log_text.splitlines()
           if " FAIL " in ln and "interrupted by SIGTERM" not in ln]
    if bad or drv.returncode != 0:
        print(log_text[-3000:])
        fail("the selftest failed a check (%s) or the driver exited %d" %
             (bad[:1], drv.returncode))
    print("replay: every replay refused; the 2 workers kept their slots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
