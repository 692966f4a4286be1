"""An FX graph as standalone Python source, and back.

`render_module(root, graph)` writes the graph as a `class Repro(torch.nn.Module)` whose forward is
FX's own generated code, preceded by the imports that code needs (FX hands us the globals it
references; we turn each one back into an import). Tensor attributes (parameters, buffers,
constants read by get_attr) become entries of an `ATTRS` table of metadata, regenerated from
the seed at load time; leaf submodules (call_module) are rebuilt from their `repr`, which is
valid constructor syntax for the torch.nn modules that reach a captured graph.

`load_module(ns, seed)` builds the Repro module from an executed script namespace and
`load_graph_module(ns, seed)` traces it back to a GraphModule: the generated forward is
straight-line code, so symbolic tracing recovers the same graph.
"""

from __future__ import annotations

import builtins
import keyword
import math
import pprint
import types
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from tracetorch.debug import inputs as input_specs


class ReproUnsupported(Exception):
    """The graph uses something a standalone script cannot rebuild (reported, never hidden)."""


@dataclass
class RenderedModule:
    source: str                       # imports + class Repro + ATTRS table
    attrs: dict = field(default_factory=dict)
    num_nodes: int = 0
    renames: dict = field(default_factory=dict)   # original get_attr/call_module target -> flat name


def _flat_name(target: str, taken: set) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in target.replace(".", "__"))
    if not name or name[0].isdigit() or keyword.iskeyword(name):
        name = "a_" + name
    base, i = name, 1
    while name in taken:
        name = f"{base}_{i}"
        i += 1
    taken.add(name)
    return name


def _fetch_attr(root: torch.nn.Module, target: str):
    obj = root
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _import_line(name: str, obj) -> str:
    """An import statement binding `name` to `obj` in the generated script."""
    if isinstance(obj, types.ModuleType):
        return f"import {obj.__name__}" if obj.__name__ == name else f"import {obj.__name__} as {name}"
    if name in ("inf", "nan") and isinstance(obj, float):
        return f"from math import {name}"
    if obj is type(None):
        return "NoneType = type(None)"
    if obj is torch.device:
        return f"{name} = torch.device"
    if getattr(builtins, name, None) is obj:
        return ""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if module and qualname and "<" not in qualname:
        head, _, rest = qualname.partition(".")
        if rest:
            return f"from {module} import {head} as _{name}_owner\n{name} = _{name}_owner.{rest}"
        return f"from {module} import {qualname} as {name}" if qualname != name else f"from {module} import {name}"
    raise ReproUnsupported(f"the graph calls {obj!r}, which a standalone script cannot import")


def _module_ctor(mod: torch.nn.Module) -> str:
    """Constructor source for a leaf submodule, checked by evaluating it."""
    cls = type(mod)
    if not cls.__module__.startswith("torch.nn"):
        raise ReproUnsupported(f"submodule of type {cls.__module__}.{cls.__qualname__} cannot be rebuilt "
                               "from source; only torch.nn leaf modules can")
    text = f"torch.nn.{repr(mod)}"
    try:
        rebuilt = eval(text, {"torch": torch, "inf": math.inf, "nan": math.nan})
    except Exception as e:
        raise ReproUnsupported(f"cannot rebuild submodule {repr(mod)!r} from its repr: {e}") from None
    if type(rebuilt) is not cls or [p.shape for p in rebuilt.parameters()] != [p.shape for p in mod.parameters()]:
        raise ReproUnsupported(f"rebuilding {repr(mod)!r} from its repr gives a different module")
    return text


def count_nodes(graph: fx.Graph) -> int:
    """Compute nodes: everything but placeholders and the output (what the minifier reduces)."""
    return sum(1 for n in graph.nodes if n.op not in ("placeholder", "output"))


def render_module(root: torch.nn.Module, graph: fx.Graph) -> RenderedModule:
    """Python source defining `Repro` (the graph) and `ATTRS` (metadata of its tensor attributes)."""
    g = fx.Graph()
    env: dict = {}
    g_out = g.graph_copy(graph, env)
    g.output(g_out)
    g._codegen = fx.graph.CodeGen()  # flat positional inputs, whatever pytree codegen the source had

    taken: set = {"training"}
    attrs: dict = {}
    submodules: dict = {}
    renames: dict = {}
    for node in g.nodes:
        if node.op == "get_attr":
            value = _fetch_attr(root, node.target)
            name = _flat_name(node.target, taken)
            if isinstance(value, torch.Tensor):
                spec = input_specs.tensor_spec(value)
                spec["attr"] = "parameter" if isinstance(value, torch.nn.Parameter) else "buffer"
                attrs[name] = spec
            elif isinstance(value, torch.nn.Module):
                submodules[name] = _module_ctor(value)
            else:
                raise ReproUnsupported(f"get_attr {node.target!r} holds a {type(value).__name__}")
            renames[node.target] = name
            node.target = name
        elif node.op == "call_module":
            name = _flat_name(node.target, taken)
            submodules[name] = _module_ctor(_fetch_attr(root, node.target))
            renames[node.target] = name
            node.target = name
    g.lint()

    code = g.python_code(root_module="self")
    imports = ["import torch"]
    for name, obj in sorted(code.globals.items()):
        line = _import_line(name, obj)
        if line and line not in imports:
            imports.append(line)

    body = ["class Repro(torch.nn.Module):", "    def __init__(self):", "        super().__init__()"]
    for name, ctor in submodules.items():
        body.append(f"        self.{name} = {ctor}")
    body.append("        # tensor attributes are created from ATTRS by the loader (seeded or saved values)")
    forward = [line for line in code.src.strip("\n").splitlines()]
    body += ["    " + line if line.strip() else "" for line in forward]
    attrs_src = "ATTRS = " + pprint.pformat(attrs, width=110, sort_dicts=False) if attrs else "ATTRS = {}"
    source = "\n".join(imports) + "\n\n\n" + "\n".join(body).rstrip() + "\n\n\n" + attrs_src + "\n"
    return RenderedModule(source=source, attrs=attrs, num_nodes=count_nodes(g), renames=renames)


def load_module(ns: dict, seed: int, state: dict | None = None) -> torch.nn.Module:
    """Instantiate `Repro` from an executed script namespace; attributes seeded or from `state`."""
    torch.manual_seed(seed)  # submodules rebuilt from their repr initialise their own parameters
    mod = ns["Repro"]()
    gen = torch.Generator().manual_seed(seed + 7919)
    for name, spec in ns.get("ATTRS", {}).items():
        value = input_specs.make_tensor(spec, gen)
        if spec.get("attr") == "parameter":
            param = torch.nn.Parameter(value.detach(), requires_grad=spec.get("requires_grad", False))
            mod.register_parameter(name, param)
        else:
            mod.register_buffer(name, value.detach())
    if state:
        mod.load_state_dict(state, strict=False)
    return mod


def load_graph_module(ns: dict, seed: int, state: dict | None = None) -> fx.GraphModule:
    mod = load_module(ns, seed, state)
    return fx.symbolic_trace(mod)
