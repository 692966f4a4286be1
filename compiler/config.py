"""tracetorch's typed configuration: `config.<section>.<option>`.

Values come from four layers, each overriding the one before (DESIGN section 3):
    defaults  <  YAML file named by TRACE_CONFIG  <  TRACE_<SECTION>_<OPTION> environment
    variables  <  config.patch(...) / compiler.compile(options=...) / assignment / load_dict
Every mistake is a ConfigError that says what was wrong and what is accepted; nothing falls
back to a default silently. `python -m tracetorch.compiler.config` prints the effective configuration and
where each non-default value came from (`--yaml` prints it as YAML).

A part that needs a new option adds one `_opt(...)` line to its own section below.
"""
from __future__ import annotations

import contextlib
import copy
import difflib
import os
import sys
from dataclasses import dataclass
from typing import Any

import yaml


class ConfigError(ValueError):
    """A configuration value or name that does not exist or has the wrong type."""


@dataclass(frozen=True)
class Option:
    default: Any
    doc: str
    kind: str                      # bool | int | float | str | list[int] | list[str]
    choices: tuple | None = None
    optional: bool = False         # None is a valid value
    env: tuple[str, ...] = ()      # extra environment names (besides TRACE_<SECTION>_<OPTION>)
    low: float | None = None       # inclusive bounds of a number (each item of a list[int])
    high: float | None = None


def _opt(default, doc, *, kind=None, choices=None, optional=False, env=(), low=None, high=None):
    if kind is None:
        kind = {bool: "bool", int: "int", float: "float", str: "str"}[type(default)]
    return Option(default, doc, kind, tuple(choices) if choices else None, optional, tuple(env),
                  low, high)


SECTIONS: dict[str, dict[str, Option]] = {
    "frontend": {
        "cache_size_limit": _opt(8, "compiled entries kept per code object before running eagerly",
                                 low=0),
        "automatic_dynamic_shapes": _opt(True, "recompile a size that changed as dynamic"),
        "assume_static_by_default": _opt(True, "treat sizes as static until one changes"),
        "capture_scalar_outputs": _opt(False, "capture .item() into the graph instead of breaking"),
        "verbose": _opt(False, "full internal stack traces in graph-break and error messages"),
        "suppress_errors": _opt(False, "run a frame eagerly (logged) when capture fails internally, "
                                       "instead of raising"),
    },
    "aot": {
        "decompose": _opt(True, "decompose ATen ops into the primitive set before lowering"),
        "partitioner": _opt("min_cut", "joint-graph partitioner", choices=("min_cut", "default")),
        "recompute_pointwise": _opt(True, "recompute cheap pointwise ops in backward, not save"),
        "compile_backward_ahead": _opt(True, "compile a training graph's backward with its forward, "
                                             "before the first call (as AOTAutograd does for static "
                                             "sizes): its code generation overlaps the forward's "
                                             "Triton compiles; off = at the first backward"),
    },
    "backend": {
        "fusion": _opt(True, "fuse compatible loops into one kernel"),
        "max_fusion_size": _opt(64, "most nodes fused into one kernel", low=1),
        "fuse_independent": _opt(False, "also fuse pointwise nodes that share no buffer but run over "
                                        "the same loops (fewer launches; the compiled optimizer step "
                                        "turns it on for its per-parameter updates)"),
        "combo_kernels": _opt(False, "launch consecutive independent pointwise Triton kernels "
                                     "(no shared memory) as one kernel (codegen/triton_combo.py; "
                                     "the compiled optimizer step turns it on)"),
        "cache_enabled": _opt(True, "reuse compiled code across runs (on-disk cache)"),
        "cache_dir": _opt("", "compiled-code cache folder; empty means ~/.cache/tracetorch"),
        "native_checks": _opt(True, "check the metadata of the tensors a compiled call reads without "
                                    "taking them as arguments (parameters, buffers, optimizer state) "
                                    "with a small C++ extension built once per machine "
                                    "(compiler/native_checks.py); off: from Python, ~0.7 us per tensor"),
        "fallback_on_error": _opt(True, "run the ATen op when lowering fails instead of raising"),
        "conv_layout": _opt("auto", "activation layout of convolution graphs: 'auto' = channels_last "
                                    "on CUDA (cuDNN's NHWC kernels, as Inductor's layout "
                                    "optimization; ResNet-50 b32 bf16 on the H200 with CUDA graphs "
                                    "4.31 -> 3.52 ms, ConvNeXt-T unchanged), 'channels_last' "
                                    "everywhere, 'off' as eager",
                            choices=("auto", "channels_last", "off")),
        "conv_bias": _opt("auto", "where a convolution's bias is added: 'auto' = in our kernels on CUDA "
                                  "(a pointwise add fused into the consumer; ATen's cuDNN path adds it "
                                  "in a kernel of its own per convolution), 'kernel' everywhere (tests), "
                                  "'extern' inside the ATen call",
                          choices=("auto", "kernel", "extern")),
        "pad_gemm": _opt("auto", "pad matrix products whose N or K is not a multiple of 8 "
                                 "(cuBLAS's 16-bit tensor-core kernels need aligned rows): 'auto' "
                                 "= 16-bit products on CUDA, 'always' (any device and dtype), 'off'",
                         choices=("auto", "always", "off")),
        "verify_schedule": _opt(False, "check every schedule's kernel-group invariants "
                                       "(scheduler/verify.py; the tests turn it on)"),
        "cudagraphs": _opt(False, "record each compiled graph (inference, or a training forward "
                                  "and its backward) into a CUDA graph and replay it (one launch "
                                  "per call; compiler.compile(mode='reduce-overhead') sets it)"),
        "cudagraph_max_recordings": _opt(8, "input signatures (sizes, strides, dtypes) recorded "
                                            "per graph before CUDA graphs are turned off for it",
                                         low=1),
        "cudagraph_buckets": _opt(True, "a dynamic-shape inference graph replays the recording of its "
                                        "size's bucket (inputs padded, outputs cut back) where the "
                                        "graph proves padding unseen (runtime/cudagraph_buckets.py); "
                                        "off: one recording per size"),
        "renest_fusion": _opt("auto", "fuse a pointwise node into a reduction whose loops run in another "
                                      "order by re-nesting its loops (channels-last results and their "
                                      "per-channel statistics; a bias gradient's partial sums and the "
                                      "product they reduce): 'auto' = for C++ kernels, and for Triton "
                                      "kernels whose every access steps along the same kind of loop (on "
                                      "the H100 a re-nested ResNet-50 max-pool backward reading NCHW in a "
                                      "channels-last statistic took 4.7 ms, its own kernel 0.2 ms), 'on', "
                                      "'off'", choices=("auto", "on", "off")),
        "cudagraph_random_ops": _opt(False, "also record graphs with random ops that draw from the "
                                            "default CUDA generator (dropout), fused attention with "
                                            "dropout excepted; experimental: a GPT-2 training step "
                                            "crashed in its backward on the H100, cause not yet found"),
        "cpu_codegen": _opt("cpp", "code generator for CPU tensors; 'triton' runs Triton kernels "
                                   "through its interpreter (tests of the Triton codegen on CPU)",
                            choices=("cpp", "triton")),
    },
    "triton": {
        "autotune": _opt(True, "benchmark block sizes / warps and keep the fastest"),
        "max_block": _opt(1024, "largest block size tried for a Triton kernel", low=1),
        "num_warps_choices": _opt([2, 4, 8], "num_warps values tried when autotuning",
                                  kind="list[int]", low=1),
        "kernel_dir": _opt("", "folder for generated Triton kernel files and autotune winners; "
                               "empty means <tmp>/tracetorch_<user>/triton"),
        "persistent_reduction_max": _opt(4096, "largest reduction size done in one block "
                                               "(persistent); larger ones loop over RBLOCK chunks", low=1),
        "persistent_outer_reduction_max": _opt(64, "the same for an outer reduction (loads contiguous "
                                                  "along the outputs, strided along the rows; "
                                                  "inductor's limit)", low=1),
        "persistent_outer_small_max": _opt(256, "the same for an outer reduction of at most 8192 outputs "
                                                "(a latency-bound one: split reductions' second "
                                                "passes; longer tiles spill)", low=1),
        "autotune_pointwise": _opt(False, "also sweep pointwise and persistent-reduction kernels "
                                          "(their candidates timed within 1% on H100; looped "
                                          "reductions are always swept when autotune is on)"),
        "autotune_max_configs": _opt(2, "most candidate configs benchmarked per kernel (each is a "
                                               "separate Triton compile: cold compile time)", low=1),
        "compile_threads": _opt(0, "worker processes compiling a graph's Triton kernels ahead of "
                                   "their first launch (in parallel); 0 = min(cores, 16), "
                                   "1 = none (each kernel compiled at its first launch)", low=0),
        "compile_timeout": _opt(300.0, "seconds a worker may take for one kernel before the main "
                                       "process compiles it itself", low=0),
    },
    "cpp": {
        "cxx": _opt("g++", "C++ compiler used for CPU kernels"),
        "openmp": _opt(True, "parallelise CPU kernels with OpenMP"),
        "threads": _opt(0, "OpenMP threads; 0 means torch.get_num_threads()", low=0),
        "extra_flags": _opt(["-O3", "-march=native"], "extra C++ compiler flags",
                            kind="list[str]"),
    },
    "debug": {
        "compile_debug": _opt(False, "write the TRACE_COMPILE_DEBUG dump folder",
                              env=("TRACE_COMPILE_DEBUG",)),
        "debug_dir": _opt("./trace_debug", "base folder of the debug dump folders",
                          env=("TRACE_COMPILE_DEBUG_DIR",)),
    },
    "repro": {
        "after": _opt(None, "where failures are caught for repro scripts", kind="str",
                      choices=("frontend", "backend"), optional=True),
        "level": _opt(2, "1 repro on failure, 2 +minifier launcher, 3 always, 4 +accuracy",
                      choices=(1, 2, 3, 4)),
        "tolerance": _opt(1e-3, "accuracy tolerance when comparing against eager", low=0),
        "timeout": _opt(60, "seconds before a minifier candidate counts as hung", low=1),
        "save_real_inputs": _opt(False, "save the failing inputs' values beside repro.py (torch.save)"),
    },
    "testing": {
        "cudagraph_stand_in": _opt(False, "record 'CUDA graphs' with a stand-in that re-runs the "
                                          "graph, on any device (CPU tests of the bookkeeping)"),
        "inject_relu_bug": _opt(None, "make codegen miscompile relu (tests of repro/minifier)",
                                kind="str", choices=("compile_error", "runtime_error", "accuracy"),
                                optional=True),
    },
}

DEFAULT_SOURCE = "default"

# -- layers -------------------------------------------------------------------------------------
_yaml_layer: dict[tuple[str, str], tuple[Any, str]] = {}
_env_layer: dict[tuple[str, str], tuple[Any, str]] = {}
_set_layer: dict[tuple[str, str], tuple[Any, str]] = {}
_patch_stack: list[dict[tuple[str, str], Any]] = []
_effective: dict[str, dict[str, Any]] = {}
_sources: dict[tuple[str, str], str] = {}


def _recompute() -> None:
    eff = {sec: {} for sec in SECTIONS}
    sources = {}
    for sec, opts in SECTIONS.items():
        for name, opt in opts.items():
            key, value, source = (sec, name), opt.default, DEFAULT_SOURCE
            for layer in (_yaml_layer, _env_layer, _set_layer):
                if key in layer:
                    value, source = layer[key]
            for patch_layer in _patch_stack:
                if key in patch_layer:
                    value, source = patch_layer[key], "patch"
            eff[sec][name] = value
            sources[key] = source
    # one store per section, no clear(): another thread reading an option meanwhile (the Triton
    # compile pool's callbacks read config.triton while a config.patch enters or exits) never
    # finds the section empty (it got "unknown option 'compile_timeout'" on the H200)
    for sec, values in eff.items():
        _effective[sec] = values
    _sources.update(sources)


# -- names and values ---------------------------------------------------------------------------
def _suggest(name: str, valid) -> str:
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.5)
    return f" Did you mean '{close[0]}'?" if close else ""


def _unknown_section(section: str, where: str) -> ConfigError:
    return ConfigError(f"{where}: unknown config section '{section}'.{_suggest(section, SECTIONS)} "
                       f"Valid sections: {', '.join(SECTIONS)}.")


def _unknown_option(section: str, name: str, where: str) -> ConfigError:
    valid = SECTIONS[section]
    return ConfigError(f"{where}: unknown option '{section}.{name}'.{_suggest(name, valid)} "
                       f"Valid options of [{section}]: {', '.join(valid)}.")


def resolve_key(key: str, where: str = "config") -> tuple[str, str]:
    """'frontend.cache_size_limit' or 'frontend_cache_size_limit' -> ('frontend', 'cache_size_limit')."""
    if "." in key:
        section, _, name = key.partition(".")
    else:
        section, _, name = key.partition("_")
    section = section.lower()
    if section not in SECTIONS:
        full = [f"{s}.{o}" for s, opts in SECTIONS.items() for o in opts]
        close = difflib.get_close_matches(key.replace("_", ".", 1) if "." not in key else key,
                                          full, n=1, cutoff=0.5)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"{where}: unknown option '{key}' (an option is named section.option, "
                          f"e.g. frontend.cache_size_limit).{hint} Valid sections: "
                          f"{', '.join(SECTIONS)}.")
    if name not in SECTIONS[section]:
        raise _unknown_option(section, name, where)
    return section, name


def _accepted(opt: Option) -> str:
    if opt.choices:
        text = " or ".join(repr(c) for c in opt.choices)
        return f"{text}{' or None' if opt.optional else ''}"
    kind = {"int": "an int", "list[int]": "a list of ints", "list[str]": "a list of strings",
            "bool": "a bool"}.get(opt.kind, f"a {opt.kind}")
    bounds = [f">= {opt.low:g}" if opt.low is not None else "",
              f"<= {opt.high:g}" if opt.high is not None else ""]
    if any(bounds):
        kind += (" with each item " if opt.kind.startswith("list") else " ") + " and ".join(b for b in bounds if b)
    return f"{kind}{' or None' if opt.optional else ''}"


def _in_range(opt: Option, value) -> bool:
    numbers = value if isinstance(value, list) else [value]
    return all((opt.low is None or v >= opt.low) and (opt.high is None or v <= opt.high)
               for v in numbers if isinstance(v, (int, float)))


def check_value(section: str, name: str, value: Any, where: str = "config") -> Any:
    """A validated copy of `value` for option section.name, or a ConfigError saying what's accepted."""
    opt = SECTIONS[section][name]
    bad = ConfigError(f"{where}: {section}.{name} = {value!r} ({type(value).__name__}) is not "
                      f"valid; accepted: {_accepted(opt)}.")
    if value is None:
        if opt.optional:
            return None
        raise bad
    kind = opt.kind
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif kind == "str":
        ok = isinstance(value, str)
    else:
        item = int if kind == "list[int]" else str
        ok = isinstance(value, (list, tuple)) and all(
            isinstance(v, item) and not isinstance(v, bool) for v in value)
        value = list(value) if ok else value
    if not ok or (opt.choices and value not in opt.choices) or not _in_range(opt, value):
        raise bad
    return copy.copy(value)


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_text(section: str, name: str, text: str, where: str) -> Any:
    """Convert an environment string to the option's type."""
    opt = SECTIONS[section][name]
    raw = text.strip()
    if opt.optional and raw.lower() in ("", "none", "null"):
        return None
    try:
        if opt.kind == "bool":
            if raw.lower() in _TRUE | _FALSE:
                return raw.lower() in _TRUE
            raise ValueError
        if opt.kind == "int":
            value = int(raw)
        elif opt.kind == "float":
            value = float(raw)
        elif opt.kind == "str":
            value = text
        else:
            items = [p.strip().strip("'\"") for p in raw.strip("[]").split(",") if p.strip()]
            value = [int(p) for p in items] if opt.kind == "list[int]" else items
        return check_value(section, name, value, where)
    except ValueError:                      # ConfigError too: one message for env mistakes
        extra = " (1/0, true/false, yes/no, on/off)" if opt.kind == "bool" else ""
        extra = extra or (" (comma-separated)" if opt.kind.startswith("list") else "")
        raise ConfigError(f"{where}={text!r}: {section}.{name} expects {_accepted(opt)}"
                          f"{extra}.") from None


# -- sources --------------------------------------------------------------------------------------
def _read_yaml(path: str) -> dict[tuple[str, str], tuple[Any, str]]:
    where = f"TRACE_CONFIG={path}"
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"{where}: cannot read the config file: {e.strerror or e}.") from None
    try:
        root = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{where}: invalid YAML at {at}: {problem}.") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the file must be a mapping of sections, e.g.\n"
                          f"frontend:\n  cache_size_limit: 4")
    lines = {}
    for knode, vnode in root.value:            # line of every option, for messages and sources
        if isinstance(vnode, yaml.MappingNode):
            for k2, _ in vnode.value:
                lines[(knode.value, k2.value)] = k2.start_mark.line + 1
    layer = {}
    for section, options in data.items():
        if section not in SECTIONS:
            raise _unknown_section(str(section), where)
        if not isinstance(options, dict):
            raise ConfigError(f"{where}: section '{section}' must be a mapping of options, "
                              f"got {options!r}.")
        for name, value in options.items():
            at = f"{where} ({path}:{lines.get((section, name), '?')})"
            if name not in SECTIONS[section]:
                raise _unknown_option(section, str(name), at)
            layer[(section, name)] = (check_value(section, name, value, at),
                                      f"yaml {path}:{lines.get((section, name), '?')}")
    return layer


def _read_env(environ) -> dict[tuple[str, str], tuple[Any, str]]:
    layer = {}
    aliases = {env: (sec, name) for sec, opts in SECTIONS.items()
               for name, opt in opts.items() for env in opt.env}
    for var in sorted(environ):
        if not var.startswith("TRACE_"):
            continue
        if var in aliases:
            key = aliases[var]
        else:
            section, _, name = var[len("TRACE_"):].partition("_")
            if section.lower() not in SECTIONS or not name:
                continue             # TRACE_LOGS, TRACE_DIR, ... belong to other parts
            section, name = section.lower(), name.lower()
            if name not in SECTIONS[section]:
                raise _unknown_option(section, name, f"environment variable {var}")
            key = (section, name)
        layer[key] = (parse_text(*key, environ[var], var), f"env {var}")
    return layer


def reload(environ=None) -> None:
    """Re-read TRACE_CONFIG and the TRACE_* environment (raises ConfigError on mistakes)."""
    env = os.environ if environ is None else environ
    path = env.get("TRACE_CONFIG")
    new_yaml = _read_yaml(path) if path else {}
    new_env = _read_env(env)
    _yaml_layer.clear()
    _yaml_layer.update(new_yaml)
    _env_layer.clear()
    _env_layer.update(new_env)
    _recompute()


# -- the public API ---------------------------------------------------------------------------
class Section:
    """`config.frontend`: typed attribute access to one section's effective values."""
    __slots__ = ("_name",)

    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, name: str):
        try:
            return _effective[self._name][name]
        except KeyError:
            raise AttributeError(str(_unknown_option(self._name, name, "config"))) from None

    def __setattr__(self, name: str, value) -> None:
        if name not in SECTIONS[self._name]:
            raise _unknown_option(self._name, name, "config")
        _set_layer[(self._name, name)] = (check_value(self._name, name, value), "assignment")
        _recompute()

    def __dir__(self):
        return list(SECTIONS[self._name])

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v!r}" for k, v in _effective[self._name].items())
        return f"config.{self._name}({body})"


def _flatten(args, kwargs, where) -> dict[tuple[str, str], Any]:
    items = {}
    for mapping in (*args, kwargs):
        for key, value in dict(mapping).items():
            if key in SECTIONS and isinstance(value, dict):        # nested {"frontend": {...}}
                for name, v in value.items():
                    if name not in SECTIONS[key]:
                        raise _unknown_option(key, name, where)
                    items[(key, name)] = check_value(key, name, v, where)
            else:
                sec, name = resolve_key(key, where)
                items[(sec, name)] = check_value(sec, name, value, where)
    return items


class _Patch(contextlib.ContextDecorator):
    def __init__(self, values: dict[tuple[str, str], Any]):
        self.values = values

    def __enter__(self):
        _patch_stack.append(self.values)
        _recompute()
        return self

    def __exit__(self, *exc):
        # remove this patch even if an inner one leaked (exceptions unwind out of order)
        for i in range(len(_patch_stack) - 1, -1, -1):
            if _patch_stack[i] is self.values:
                del _patch_stack[i]
                break
        _recompute()
        return False


def patch(*args, **kwargs) -> _Patch:
    """Context manager and decorator: `patch(**{"frontend.cache_size_limit": 2})`,
    `patch(frontend_cache_size_limit=2)`, `patch({"frontend": {...}})`. Validated at once."""
    return _Patch(_flatten(args, kwargs, "config.patch"))


def load_dict(d: dict) -> None:
    """Set every option in `d` ({section: {option: value}} or flat keys), e.g. from a repro."""
    for key, value in _flatten((d,), {}, "config.load_dict").items():
        _set_layer[key] = (value, "load_dict")
    _recompute()


def reset_assignments() -> None:
    """Forget assignments and load_dict values (env, YAML and patches stay)."""
    _set_layer.clear()
    _recompute()


def to_dict() -> dict[str, dict[str, Any]]:
    return copy.deepcopy(_effective)


def sources() -> dict[str, str]:
    """'section.option' -> where its value came from, for every non-default value."""
    return {f"{s}.{o}": src for (s, o), src in _sources.items() if src != DEFAULT_SOURCE}


def _flow(value) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


def to_yaml(with_sources: bool = True) -> str:
    """The effective configuration as YAML; non-default values carry a `# from ...` comment."""
    out = ["# tracetorch effective configuration (python -m tracetorch.compiler.config --yaml)"]
    for sec, opts in _effective.items():
        out.append(f"{sec}:")
        for name, value in opts.items():
            src = _sources.get((sec, name), DEFAULT_SOURCE)
            note = f"  # from {src}" if with_sources and src != DEFAULT_SOURCE else ""
            out.append(f"  {name}: {_flow(value)}{note}")
    return "\n".join(out) + "\n"


def describe() -> str:
    """Human-readable effective configuration with docs and sources."""
    lines = []
    for sec, opts in SECTIONS.items():
        lines.append(f"[{sec}]")
        for name, opt in opts.items():
            src = _sources.get((sec, name), DEFAULT_SOURCE)
            where = f"   <- {src}" if src != DEFAULT_SOURCE else ""
            lines.append(f"  {name} = {_effective[sec][name]!r}{where}")
            lines.append(f"      {opt.doc}")
    return "\n".join(lines)


def __getattr__(name: str):
    if name in SECTIONS:
        return _SECTION_OBJECTS[name]
    raise AttributeError(f"compiler.config has no section or attribute '{name}'."
                         f"{_suggest(name, SECTIONS)} Sections: {', '.join(SECTIONS)}.")


_SECTION_OBJECTS = {name: Section(name) for name in SECTIONS}
globals().update(_SECTION_OBJECTS)     # fast path: config.frontend is a plain module attribute


def _init() -> None:
    try:
        reload()
    except ConfigError as e:      # a mistake in the environment: a clean message, no traceback
        sys.stderr.write(f"tracetorch: {e}\n")
        raise SystemExit(2) from None


_init()


def main(argv=None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m tracetorch.compiler.config",
                                     description="Print tracetorch's effective configuration.")
    parser.add_argument("--yaml", action="store_true", help="print it as YAML (for TRACE_CONFIG)")
    args = parser.parse_args(argv)
    if args.yaml:
        sys.stdout.write(to_yaml())
        return 0
    print(describe())
    srcs = sources()
    print("\nnon-default values: " + (", ".join(f"{k} ({v})" for k, v in srcs.items())
                                      if srcs else "none (all defaults)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
