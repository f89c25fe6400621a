"""layers.py — the architecture, checked on the sources and the objects.

The layers (docs/ARCHITECTURE.md, "Layers") are the folders below; each may
use only the ones LAYERS lists for it (and itself). Checked four ways:

1. includes: every #include "..." of product code (common/, driver/,
   workers/, include/) names a file that exists, in a layer the including
   file may use; public headers (include/rlrt/) include only public headers
   and hold no function bodies (no static inline logic);
2. calls: from the objects of the plain build (nm), each object's undefined
   symbols resolved to the object that defines them: every edge between
   folders is allowed by LAYERS, and there is no cycle between folders;
3. no cycle between files: the same symbol graph has no strongly connected
   component of more than one object, except the driver core
   (common/runtime/{driver,dispatch,launcher,protocol,relays}.c: one module over
   one lock and one private header, docs/decisions/driver-core.md);
4. the runtime knows no role and no model: common/runtime names no
   application role and includes nothing of nn; librlrt exports no role
   method table.

  python3 tests/integration/layers.py        (BUILD=build by default)
"""
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))

# layer -> the layers it may use (besides itself); transitive uses are not implied
CORE = ["common/core"]
LAYERS = {
    "common/core": [],
    "common/schema": CORE,  # every config section: its keys, defaults, ranges, struct
    "common/tensor": CORE,
    "common/wire": CORE + ["common/tensor"],
    "common/runtime": CORE + ["common/tensor", "common/wire"],
    "common/sde": CORE,
    "common/text": CORE,
    "common/image": CORE,
    "common/metrics": CORE,
    "common/nn/engine": CORE + ["common/tensor"],
    "common/nn/models": CORE + ["common/schema", "common/tensor", "common/nn/engine", "common/sde"],
    "common/nn/models/lm": CORE + ["common/schema", "common/tensor", "common/nn/engine", "common/nn/models"],
    "common/nn": CORE + ["common/schema", "common/tensor", "common/nn/engine", "common/nn/models", "common/nn/models/lm"],
    "common/algo": CORE,
    "common/algo/lm": CORE + ["common/algo"],
    "common/algo/flow": CORE + ["common/algo", "common/sde"],
    "common/algo/diffusion": CORE + ["common/algo", "common/sde"],
    "common/data": CORE + ["common/schema", "common/tensor", "common/text"],
    "common/reward": CORE + ["common/schema", "common/image", "common/tensor", "common/nn/engine"],
    "common/tools": CORE + ["common/schema", "common/data", "common/text", "common/nn/models/lm"],
    "common/sim": CORE + ["common/image"],
    # batch transforms: pure functions over DataProto that return their metrics
    "common/batch": CORE + ["common/schema", "common/tensor", "common/metrics", "common/algo",
                            "common/algo/lm", "common/algo/flow", "common/algo/diffusion"],
}
LIB = [l for l in LAYERS]
TOP = LIB + ["driver", "driver/recipes", "driver/recipes/lm", "driver/recipes/embodied",
             "driver/recipes/diffusion", "workers", "workers/actor", "workers/rollout",
             "workers/env", "workers/reward", "workers/selftest"]
# the application: every library layer, and the role contracts (workers/<role>/<role>.h
# and workers/*.h) for the driver; workers/<role> may use another role's contract
for top in TOP[len(LIB):]:
    LAYERS[top] = TOP
PUBLIC_LAYER = {  # include/rlrt/<x> belongs to
    "rlrt/error.h": "common/core", "rlrt/log.h": "common/core", "rlrt/dtype.h": "common/core",
    "rlrt/config.h": "common/core", "rlrt/rlrt.h": None,
    "rlrt/tensor.h": "common/tensor", "rlrt/dataproto.h": "common/tensor", "rlrt/wire.h": "common/wire",
    "rlrt/nn/params.h": "common/nn/engine", "rlrt/nn/model.h": "common/nn/models",
}
FILE_CYCLE_OK = {frozenset("common/runtime/" + f
                           for f in ["driver", "dispatch", "launcher", "protocol", "relays"])}

problems = []


def layer_of(path):
    """The layer of a repo path (a source, or an include string)."""
    if path.startswith("rlrt/"):
        if path in PUBLIC_LAYER:
            return PUBLIC_LAYER[path]
        if path.startswith("rlrt/runtime/"):
            return "common/runtime"
        return "?"
    d = os.path.dirname(path)
    while d and d not in LAYERS:
        d = os.path.dirname(d)
    return d or "?"


def product_files():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "common", "driver", "workers",
                          "include"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    return [f for f in out if f.endswith((".c", ".h", ".cu")) and os.path.exists(os.path.join(ROOT, f))]


INC = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def check_includes():
    files = product_files()
    for f in files:
        text = open(os.path.join(ROOT, f), encoding="utf-8").read()
        src_layer = layer_of(f) if not f.startswith("include/") else layer_of(f[len("include/"):])
        public = f.startswith("include/rlrt/")
        for name in INC.findall(text):
            if name.endswith(".pb-c.h"):
                continue
            target = "include/" + name if name.startswith("rlrt/") else name
            if not os.path.exists(os.path.join(ROOT, target)):
                problems.append("%s includes \"%s\", which is not a repo path (write it from the root)"
                                % (f, name))
                continue
            if public and not name.startswith("rlrt/"):
                problems.append("public header %s includes the internal %s" % (f, name))
            tl = layer_of(name)
            if tl is None or src_layer is None or tl == src_layer:
                continue
            if tl not in LAYERS.get(src_layer, []):
                problems.append("%s (%s) includes %s (%s): not a layer it may use"
                                % (f, src_layer, name, tl))
        if public:
            body = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
            if re.search(r"\)\s*\{", body):
                problems.append("public header %s has a function body (no logic in public headers)" % f)


def symbol_graph():
    obj = os.path.join(BUILD, "obj")
    defs, uses, units = {}, collections.defaultdict(set), []
    for dp, _, fn in os.walk(obj):
        for f in fn:
            if not f.endswith(".o"):
                continue
            p = os.path.join(dp, f)
            rel = os.path.relpath(p, obj)[:-2]
            if rel.endswith(".cu"):
                rel = rel[:-3]
            if not rel.startswith(("common/", "driver/", "workers/")):
                continue
            if not os.path.exists(os.path.join(ROOT, rel + ".c")) and not os.path.exists(
                    os.path.join(ROOT, rel + ".cu")):
                continue  # a stale object of a moved source
            units.append(rel)
            for line in subprocess.run(["nm", p], capture_output=True, text=True).stdout.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] in "TDBRVWC":
                    defs.setdefault(parts[2], rel)
                elif len(parts) == 2 and parts[0] == "U":
                    uses[rel].add(parts[1])
    edges = collections.defaultdict(set)
    for u, syms in uses.items():
        for s in syms:
            d = defs.get(s)
            if d and d != u:
                edges[u].add(d)
    return units, edges


def sccs(nodes, edges):
    idx, low, stack, on, out, c = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        idx[v] = low[v] = c[0]
        c[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in idx:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in nodes:
        if v not in idx:
            visit(v)
    return out


def check_symbols():
    if not os.path.isdir(os.path.join(BUILD, "obj", "common")):
        problems.append("%s/obj not built" % BUILD)
        return
    units, edges = symbol_graph()
    for comp in sccs(units, edges):
        if frozenset(comp) not in FILE_CYCLE_OK:
            problems.append("files call each other in a cycle: " + " <-> ".join(comp))
    fedges = collections.defaultdict(set)
    for u, ds in edges.items():
        for d in ds:
            a, b = layer_of(u + ".c"), layer_of(d + ".c")
            if a != b:
                fedges[a].add(b)
                if b not in LAYERS.get(a, []):
                    problems.append("%s calls %s: %s may not use %s" % (u, d, a, b))
    lib_nodes = [l for l in LIB]
    for comp in sccs(lib_nodes, {a: [b for b in bs if b in LIB] for a, bs in fedges.items()}):
        problems.append("folders call each other in a cycle: " + " <-> ".join(comp))


def check_runtime():
    for f in product_files():
        if not (f.startswith("common/runtime/") or f.startswith("include/rlrt/runtime/")):
            continue
        text = open(os.path.join(ROOT, f), encoding="utf-8").read()
        if re.search(r'"(common/nn|rlrt/nn)/', text):
            problems.append("the runtime includes the nn layer: " + f)
        if re.search(r'"(rollout|actor|reward|env)"|RL_ROLE_', text):
            problems.append("the runtime names an application role: " + f)
    lib = os.path.join(BUILD, "lib", "librlrt.a")
    if os.path.exists(lib):
        syms = set(l.split()[-1] for l in subprocess.run(["nm", "-g", "--defined-only", lib],
                                                          capture_output=True, text=True).stdout.splitlines()
                   if len(l.split()) == 3)
        for s in ["rl_builtin_methods", "rl_test_methods", "rl_param_shard_range"]:
            if s in syms:
                problems.append("librlrt defines " + s)
        if "rl_shard_range" not in syms:
            problems.append("librlrt lacks rl_shard_range")
    else:
        problems.append(lib + " not built")


check_includes()
check_symbols()
check_runtime()
for p in problems:
    print("FAIL:", p)
if problems:
    sys.exit(1)
print("layers: includes, calls and cycles as docs/ARCHITECTURE.md draws them")
