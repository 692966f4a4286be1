"""Running repro scripts the way a user does: a fresh `python` process."""
import os
import subprocess
import sys

import torch.fx as fx

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RELU_TARGETS = ("relu",)


def run_script(path, *args, timeout=300, cwd=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    for var in ("TRACE_REPRO_AFTER", "TRACE_COMPILE_DEBUG", "TRACE_TESTING_INJECT_RELU_BUG"):
        env.pop(var, None)  # the script must carry its own configuration
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or os.path.dirname(str(path)), env=env)


def load_script_graph(path) -> fx.GraphModule:
    """The graph a repro script holds (without running its CLI)."""
    from tracetorch.debug import graph_code

    ns = {"__name__": "loaded_for_test", "__file__": str(path)}
    with open(path) as f:
        exec(compile(f.read(), str(path), "exec"), ns)
    return graph_code.load_graph_module(ns, ns.get("SEED", 0))


def compute_nodes(gm: fx.GraphModule) -> list:
    return [n for n in gm.graph.nodes if n.op not in ("placeholder", "output")]


def is_relu(node) -> bool:
    name = getattr(node.target, "__name__", str(node.target))
    return "relu" in str(node.target) or "relu" in name
