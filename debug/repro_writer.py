"""Write repro scripts: one standalone Python file per failure.

The file holds everything needed to reproduce, readable top to bottom: a docstring with the
original error and how to use the script, the graph as code (`Repro`), the metadata of its tensor
attributes (`ATTRS`) and inputs (`INPUTS`, values regenerated from `SEED`), the stage and
compiler that failed, the effective configuration and the failure record. The CLI at the bottom
hands the namespace to `debug.repro_cli`; if tracetorch is not importable (the script was moved
out of a checkout that is not pip-installed) it adds the checkout it was written from to
sys.path.
"""

from __future__ import annotations

import datetime
import os
import pprint

import torch

from tracetorch.debug import graph_code
from tracetorch.debug import inputs as input_specs
from tracetorch.debug.failure import Failure

_TRACETORCH_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_MAIN = '''

if __name__ == "__main__":
    import sys
    try:
        from tracetorch import debug; import tracetorch.debug.repro_cli
    except ImportError:  # tracetorch not installed: use the checkout this script was written from
        sys.path.insert(0, TRACETORCH_ROOT)
    from tracetorch.debug.repro_cli import main
    sys.exit(main(globals(), __file__))
'''


def _literal(value) -> str:
    return pprint.pformat(value, width=100, sort_dicts=False)


def _indent_block(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else "" for line in text.splitlines())


def render_script(root: torch.nn.Module, graph, input_values_or_specs: list, *, stage: str,
                  compiler: str, config: dict, failure: Failure | None, accuracy: bool,
                  seed: int = 0, real_inputs: str | None = None, default_action: str = "run",
                  title: str = "repro", compile_id: str | None = None, grad_enabled: bool | None = None):
    """(source of a repro script, RenderedModule). Inputs may be values or specs (dicts)."""
    rendered = graph_code.render_module(root, graph)
    specs = [v if isinstance(v, dict) and "kind" in v else input_specs.value_spec(v)
             for v in input_values_or_specs]
    placeholders = [n.name for n in graph.nodes if n.op == "placeholder"]

    when = datetime.datetime.now().isoformat(timespec="seconds")
    origin = f"compile id {compile_id}, " if compile_id else ""
    if failure is not None:
        error = _indent_block(failure.headline()[:2000])
        status = f"It reproduces this failure ({origin}stage {stage!r}):\n\n{error}\n"
    else:
        status = f"Written before compiling ({origin}stage {stage!r}, TRACE_REPRO_LEVEL=3); no failure was seen yet.\n"
    doc = (
        f'"""tracetorch {title}: {rendered.num_nodes} graph nodes, written {when}.\n\n{status}\n'
        "Usage:\n"
        "    python THIS_FILE               reproduce (exit 1 and the error on stderr; exit 0 if it passes)\n"
        "    python THIS_FILE --minify      shrink the graph, write repro_minified.py beside this file\n"
        "    --check-str REGEX              only failures whose text matches count\n"
        "    --accuracy                     also compare with eager in float64\n"
        "    --help                         every option\n"
        '"""\n'
    ).replace("THIS_FILE", "repro.py" if title == "repro" else f"{title}.py")

    input_lines = []
    for name, spec in zip(placeholders, specs):
        input_lines.append(f"    {spec!r},  # {name}: {input_specs.describe(spec)}")
    inputs_src = "INPUTS = [\n" + "\n".join(input_lines) + "\n]\n" if input_lines else "INPUTS = []\n"

    failure_src = _literal(failure.to_dict()) if failure is not None else "None"
    parts = [
        doc,
        rendered.source,
        "\n# Inputs: metadata only; values are regenerated from SEED (or loaded from REAL_INPUTS,\n"
        "# a torch.save file beside this script, when real values were asked for).\n",
        inputs_src,
        f"SEED = {seed}\n",
        f"REAL_INPUTS = {real_inputs!r}\n",
        "\n# How the graph was compiled when it failed.\n",
        f"STAGE = {stage!r}  # frontend: the user's backend on the captured graph; "
        "backend: our inner compiler after aot\n",
        f"COMPILER = {compiler!r}\n",
        f"ACCURACY = {bool(accuracy)!r}  # compare with eager in float64\n",
        f"GRAD_ENABLED = {torch.is_grad_enabled() if grad_enabled is None else grad_enabled!r}  "
        "# grad mode at compile time (decides inference or training in aot)\n",
        f"DEFAULT_ACTION = {default_action!r}\n",
        f"TRACETORCH_ROOT = {_TRACETORCH_ROOT!r}\n",
        "\n# Effective configuration at failure time (restored before compiling).\n",
        f"CONFIG = {_literal(config)}\n",
        "\n# The original failure (kind, exception type, message, full text).\n",
        f"FAILURE = {failure_src}\n",
        _MAIN,
    ]
    return "".join(parts), rendered


def write_text(path: str, text: str) -> str:
    """Write atomically, so a crash mid-write never leaves a half script behind."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def save_real_inputs(path: str, values: list, root: torch.nn.Module, renames: dict) -> None:
    """torch.save of the actual input values and tensor attributes (only when asked).

    `renames` maps the graph's attribute targets to the flat names the script uses."""
    state = {}
    for target, flat in renames.items():
        obj = graph_code._fetch_attr(root, target)
        if isinstance(obj, torch.Tensor):
            state[flat] = obj.detach().clone()
        elif isinstance(obj, torch.nn.Module):
            state.update({f"{flat}.{k}": v.detach().clone() for k, v in obj.state_dict().items()})
    data = {"inputs": [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in values],
            "state": state}
    torch.save(data, path)
