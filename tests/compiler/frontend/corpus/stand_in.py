"""A minimal stand-in for capture_frame (docs/CONTRACTS.md section 6), for the runtime's unit
tests: it runs the function as is and guards each argument (TENSOR_MATCH with the requested
dynamic dims, CONSTANT_MATCH for scalars). If the function has a `callee` attribute, the result
calls it through make_compiled_callable, like a graph break at a call would. A function with
`no_graph = True` captures no graph (nothing to compile).
"""
import dataclasses

import torch

from tracetorch.compiler.frontend.guards import Guard, TensorMeta, frame_locals


# A stand-in "captured graph": the runtime only counts graphs and reads their nodes (explain).
_GRAPH = torch.fx.symbolic_trace(lambda x: x + 1)


@dataclasses.dataclass
class _Result:
    fn: object
    guards: list
    graphs: list
    graph_breaks: list


class StandIn:
    def __init__(self):
        self.calls = []     # (fn name, compile id, dynamic_dims)

    def __call__(self, fn, args, kwargs, *, compile_id, backend, fullgraph, dynamic_dims,
                 make_compiled_callable):
        env = frame_locals(fn, args, kwargs)
        guards = []
        for name, v in env.items():
            src = f"L[{name!r}]"
            if isinstance(v, torch.Tensor):
                guards.append(Guard(src, "TENSOR_MATCH", TensorMeta.of(v, dynamic_dims.get(src, ())),
                                    f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}"))
            elif isinstance(v, (int, float, bool, str, type(None))):
                guards.append(Guard(src, "CONSTANT_MATCH", v))
        self.calls.append((fn.__name__, str(compile_id), {k: set(d) for k, d in dynamic_dims.items()}))
        run = fn
        if getattr(fn, "callee", None) is not None:
            # like a graph break at a call: the callee is compiled lazily on its first call
            callee = make_compiled_callable(fn.callee)
            run = lambda *a, **k: callee(*a, **k)  # noqa: E731
        graphs = [] if getattr(fn, "no_graph", False) else [_GRAPH]
        return _Result(run, guards, graphs, [])


