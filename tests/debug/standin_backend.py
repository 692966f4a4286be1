"""A stand-in buggy backend for the repro/minifier tests: miscompiles relu like
config.testing.inject_relu_bug asks, without generating code (fast, no C++ compiler).

It lives beside the tests (importable as tests.debug.standin_backend) so repro scripts and
minifier candidates can import it by name, exactly as they import the real backend."""
import torch
import torch.fx as fx

RELU_TARGETS = {torch.relu, torch.nn.functional.relu, torch.ops.aten.relu.default, "relu"}


def _is_relu(node):
    return node.op in ("call_function", "call_method") and node.target in RELU_TARGETS


def buggy_compile(gm: fx.GraphModule, example_inputs):
    from tracetorch.compiler import config

    bug = config.testing.inject_relu_bug
    relus = [n for n in gm.graph.nodes if _is_relu(n)]
    if not relus or bug is None:
        return gm.forward
    if bug == "compile_error":
        raise RuntimeError("standin: injected relu compile error")
    if bug == "runtime_error":
        def run(*args):
            raise RuntimeError("standin: injected relu runtime error")
        return run
    # accuracy: relu(x) + 1
    g = fx.Graph()
    env = {}
    for node in gm.graph.nodes:
        new = g.node_copy(node, lambda n: env[n])
        if _is_relu(node):
            new = g.call_function(torch.add, (new, 1))
        env[node] = new
    return fx.GraphModule(gm, g).forward


def flaky_compile(gm: fx.GraphModule, example_inputs):
    """Fails on every other call across processes (a counter file named by FLAKY_COUNTER):
    a failure that does not repeat."""
    import os

    path = os.environ["FLAKY_COUNTER"]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b".")  # one byte per call; appends are atomic across processes
    finally:
        os.close(fd)
    if os.path.getsize(path) % 2 == 1 and any(_is_relu(n) for n in gm.graph.nodes):
        raise RuntimeError("standin: flaky relu failure")
    return gm.forward


def segfault_compile(gm: fx.GraphModule, example_inputs):
    """Crashes the whole process (SIGSEGV) when the graph has a relu."""
    if any(_is_relu(n) for n in gm.graph.nodes):
        import ctypes
        ctypes.string_at(0)
    return gm.forward
