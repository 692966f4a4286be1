"""Traces for the tracetui tests: a real PyTorch TORCH_TRACE log, a trace from our compiler, and
helpers to make traces deterministic (fixed clock, pid, timings and object ids) for snapshots."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Programs and traces live under one folder of the test run (pytest's tmp dirs, shared by the
# xdist workers of a run: conftest.fixture_root). Their paths appear in the traces, hence on
# screen: normalize_trace writes that folder as FIXTURE_SHOWN, the same on every machine.
FIXTURE_SHOWN = "/fixtures"


def shared_fixture_root(tmp_path_factory) -> Path:
    """One folder per test run: the parent of the per-worker base temp under xdist."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "tracetui_fixtures"
    root.mkdir(parents=True, exist_ok=True)
    return root

# A graph break (print) and a recompile (a second call with another rank).
PROGRAM = textwrap.dedent(
    """\
    import torch


    def f(x):
        y = torch.sin(x) + 1
        print("break")
        return torch.relu(y) * 2


    cf = COMPILE
    cf(torch.randn(3))
    cf(torch.randn(3, 4))
    """
)


def write_program(root: Path, name: str, compile_expr: str) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    path = d / "prog.py"
    text = PROGRAM.replace("COMPILE", compile_expr)
    tmp = d / f".prog.{os.getpid()}.tmp"
    tmp.write_text(text)
    os.replace(tmp, path)  # atomic: parallel test workers write the same content
    return path


def run(prog: Path, env: dict, cwd: Path) -> None:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root"),
            "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, str(prog)], env={**base, **env}, cwd=str(cwd),
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{prog} failed:\n{proc.stderr[-3000:]}")


def make_torch_trace(root: Path, out: Path) -> Path:
    """torch.compile (eager backend: fast) under TORCH_TRACE; returns the trace folder."""
    prog = write_program(root, "torch", 'torch.compile(f, backend="eager")')
    # run in the program's (fixed) folder: the trace records the working directory
    # (inductor_config's xpu.cutlass_dir)
    run(prog, {"TORCH_TRACE": str(out)}, prog.parent)
    return out


def cached_torch_trace(root: Path, work: Path) -> Path:
    """The normalized PyTorch trace, made once per test run (shared by the xdist workers):
    running torch.compile in a subprocess costs seconds."""
    import fcntl

    import torch

    from tracetorch.logs.trace_reader import find_trace_files

    key = hashlib.md5(f"{torch.__version__}\n{PROGRAM}\n{_VOLATILE}".encode()).hexdigest()[:12]
    cached = root / f"torch_trace_{key}" / "dedicated_log_torch_trace_x.log"
    cached.parent.mkdir(parents=True, exist_ok=True)
    with open(cached.parent / ".lock", "w") as lock:  # parallel workers: one makes it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cached.is_file():
            raw = make_torch_trace(root, work / "raw")
            normalize_trace(find_trace_files(raw)[0], work / "norm.log", root=root)
            # the program beside the trace: the trace names it at /fixtures/torch/prog.py,
            # which does not exist; tracetui then reads the file of that name beside the trace
            (cached.parent / "prog.py").write_text((root / "torch" / "prog.py").read_text())
            os.replace(work / "norm.log", cached)
    return cached


def make_our_debug_run(root: Path, base: Path) -> Path:
    """compiler.compile under TRACE_COMPILE_DEBUG=1 (compiled-code cache off, so that every
    stage runs and writes its records); returns the debug run folder. Parallel test workers of
    one run share it (made once, under a lock)."""
    import fcntl

    base = root / "ours" / "trace_debug"
    base.parent.mkdir(parents=True, exist_ok=True)
    with open(base.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not any(base.glob("run_*")):
            prog = write_program(root, "ours", "__import__('tracetorch').compiler.compile(f)")
            run(prog, {"TRACE_COMPILE_DEBUG": "1", "TRACE_COMPILE_DEBUG_DIR": str(base),
                       "TRACE_BACKEND_CACHE_ENABLED": "0"}, base.parent)
    runs = sorted(base.glob("run_*"))
    assert runs, f"no debug run folder under {base}"
    return runs[-1]


# -- determinism --------------------------------------------------------------------------------
_PREFIX = re.compile(r"^([A-Z])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ")
# In envelope strings and payloads of both traces: addresses and uuids (torch names compiled
# functions __compiled_fn_5_<uuid>).
_IDS = [(re.compile(r" at 0x[0-9a-f]+>"), " at 0x7f0000000000>"),
        (re.compile(r"[0-9a-f]{8}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{4}_[0-9a-f]{12}"),
         "00000000_0000_0000_0000_000000000000")]
_VOLATILE = [*_IDS,
             # timings in payloads (dynamo's counters, compilation_metrics, chromium events)
             (re.compile(r'("\w*time\w*_s": )[\d.e-]+'), r"\g<1>0.5"),
             (re.compile(r'("\w+_us": )\d+'), r"\g<1>0"),
             (re.compile(r"\b\d{9,}\b"), "123456789"),  # object ids, timestamps in us
             (re.compile(r"(latency = )[\d.]+"), r"\g<1>1.0"),
             (re.compile(r'("ts": )[\d.]+'), r"\g<1>0"),
             # torch's GLOBAL_STATE guard records the machine's thread count
             (re.compile(r'("num_threads":)\d+'), r"\g<1>1")]


def _stable_meta(value):
    if isinstance(value, dict):
        return {k: (0.5 if isinstance(v, float) and ("time" in k or k.endswith(("_s", "_us"))) else
                    0 if isinstance(v, int) and not isinstance(v, bool) and k.endswith(("_us", "_ns"))
                    else _stable_meta(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_stable_meta(v) for v in value]
    if isinstance(value, str):
        for rx, rep in _IDS:
            value = rx.sub(rep, value)
    return value


def _replace_root(text: str, root: Path) -> str:
    """The fixture folder as FIXTURE_SHOWN, also where a tool shortened its path. PyTorch's
    guard comments drop the leading folders that the path shares with torch's install folder
    (torch.utils._traceback.shorten_filename): with torch under /tmp that leaves
    `pytest-of-root/pytest-9/tracetui_fixtures/...`; with torch under /check it shares only
    `/` and the cut takes one character more (`mp/pytest-of-root/...`). So every path token
    ending in the folder's (unique) name is replaced, written absolute if it was."""
    token = re.compile(r"[\w.\-/]*" + re.escape(root.name) + r"\b")
    return token.sub(lambda m: FIXTURE_SHOWN if m.group().startswith("/")
                     else FIXTURE_SHOWN.lstrip("/"), text)


def normalize_trace(src: Path, dst: Path, rules=None, writer_lines: bool = False,
                    root: Path | None = None) -> Path:
    """Copy a trace with clock, pid, timings and object ids fixed (md5s recomputed). rules:
    the (regex, replacement) pairs for payloads (default _VOLATILE); writer_lines: the writer's
    source line in each prefix set to 0 (ours move with every edit of compiler/); root: the
    run's fixture folder, written as FIXTURE_SHOWN."""
    out, tick = [], 0
    text = src.read_text()
    if root is not None:
        text = _replace_root(text, root)
    records = re.split(r"\n(?=[^\t])", text)
    for rec in records:
        if not rec.strip():
            continue
        head, *payload = rec.rstrip("\n").split("\n")
        tick += 1
        m = _PREFIX.match(head)
        rest = head[m.end():] if m else head
        where, _, env_text = rest.partition("] ")
        env = _stable_meta(json.loads(env_text))
        text = "\n".join(line[1:] for line in payload)
        for rx, rep in (_VOLATILE if rules is None else rules):
            text = rx.sub(rep, text)
        if writer_lines:
            where = re.sub(r":\d+$", ":0", where)
        if payload:
            env["has_payload"] = hashlib.md5(text.encode()).hexdigest()
        line = f"V1122 12:00:{tick // 1000:02d}.{tick % 1000:03d}000 4242 {where}] {json.dumps(env)}"
        out.append(line + "".join(f"\n\t{p}" for p in text.split("\n")) if payload else line)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text("\n".join(out) + "\n")
    return dst


# What varies in a trace of our compiler between runs or machines, besides the clock, pid and
# timings (normalize_trace fixes those): object ids, addresses of functions in bytecode listings,
# where Python modules live (ID_MATCH guards name the module's file), the versions in the
# tracetorch_version record, and which math functions the machine's glibc has SIMD versions of
# (libmvec: the C++ module's extern "C" block of __simd__ declarations, removed: the module
# then reads as on a machine without libmvec, and the line numbers of later records do not
# depend on the machine either). Nothing else in the generated C++ asks the machine (-march and
# the thread count are compiler flags and runtime settings, not in the source).
_OURS_VOLATILE = [
    *_IDS,
    # object ids; not the digits of a float constant in kernel code (2.2137376921775787049e-09)
    (re.compile(r"(?<![.\w])\d{9,}(?![.\w])"), "123456789"),
    (re.compile(r"(<module '[\w.]+' from ')[^'\n\"]*'?"), r"\g<1><site-packages>'"),
    (re.compile(r'("python": )"[^"]*"'), r'\g<1>"3.x"'),
    (re.compile(r'("torch_version": )"[^"]*"'), r'\g<1>"2.x"'),
    (re.compile(r'extern "C" \{\n(__attribute__\(\(__simd__[^\n]*\n)+\}\n'), ""),
]
def normalized_our_run(root: Path, run: Path) -> Path:
    """A copy of one of our debug run folders, normalized for snapshots (trace.log as in
    normalize_trace plus _OURS_VOLATILE; the per-compile source.py files), at a fixed path
    (shown on screen). Files are replaced atomically: parallel workers and sessions write the
    same content."""
    import fcntl

    dst = root / "ours_snapshot" / "run_normalized"
    dst.mkdir(parents=True, exist_ok=True)
    with open(dst.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        tmp = dst / f".trace.{os.getpid()}.tmp"
        normalize_trace(run / "trace.log", tmp, _OURS_VOLATILE, writer_lines=True, root=root)
        os.replace(tmp, dst / "trace.log")
        for src in sorted(run.glob("*_*/source.py")):
            (dst / src.parent.name).mkdir(exist_ok=True)
            tmp = dst / src.parent.name / f".source.{os.getpid()}.tmp"
            tmp.write_text(_replace_root(src.read_text(), root))
            os.replace(tmp, dst / src.parent.name / "source.py")
    return dst


# A stand-in for debug's repro script: prints minifier-style progress, writes the result.
FAKE_REPRO = '''\
import sys
if "--minify" not in sys.argv:
    sys.exit("RuntimeError: injected relu bug")
for line in ["Strategy: Truncate suffix (G: 4)", "Strategy: Delta Debugging (G: 2)",
             "SUCCESS: Went from 6 to 2 nodes", "Made 9 queries",
             "Wrote minimal repro out to repro_minified.py"]:
    print(line, flush=True)
open("repro_minified.py", "w").write(
    '"""tracetorch repro_minified: 2 graph nodes"""\\n'
    "class Repro(torch.nn.Module):\\n"
    "    def forward(self, x):\\n"
    "        relu = torch.relu(x);  x = None\\n"
    "        return (relu,)\\n\\n"
    "# Inputs: metadata only\\nINPUTS = []\\n")
'''


def make_failed_debug_run(root: Path) -> Path:
    """A debug run folder with a failed compile and a repro script (a stand-in for debug's)."""
    from tracetorch.tui.synthetic import write_synthetic_trace

    root.mkdir(parents=True, exist_ok=True)
    write_synthetic_trace(root / "trace.log", fail=True)
    (root / "repro").mkdir(exist_ok=True)
    (root / "repro" / "repro.py").write_text(FAKE_REPRO)
    (root / "config.yaml").write_text("{}\n")
    return root


# -- issue 18: programs run under both compilers ------------------------------------------------
# Recompiles on a Python float and on a module attribute: PyTorch's reasons for these span lines
# (the guard, then "User stack trace:" and the user's frame); ours name the guard's user line.
VALUE_RECOMPILE_PROGRAM = textwrap.dedent(
    """\
    import torch


    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.training_flag = True
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x, scale):
            y = self.lin(x) * scale
            if self.training_flag:
                y = y + 1
            return y


    m = M()
    cm = COMPILE
    cm(torch.randn(2, 4), 0.5)
    cm(torch.randn(2, 4), 0.7)
    m.training_flag = False
    cm(torch.randn(2, 4), 0.7)
    """
)

COMPILERS = {"torch": 'torch.compile({target}, backend="eager")',
             "torch_inductor": "torch.compile({target})",
             "ours": "__import__('tracetorch').compiler.compile({target})"}


def program_trace(root: Path, name: str, program: str, which: str, extra_env=None,
                  target: str = "m") -> Path:
    """Run `program` (COMPILE replaced for `which`: "torch" or "ours") once per test run, under
    TORCH_TRACE or TRACE_DIR; returns the trace folder. Shared by xdist workers (a lock)."""
    import fcntl

    d = root / f"{name}_{which}"
    d.mkdir(parents=True, exist_ok=True)
    out = d / "trace"
    with open(d / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (d / ".done").exists():
            prog = d / "prog.py"
            prog.write_text(program.replace("COMPILE", COMPILERS[which].format(target=target)))
            env = {"TORCH_TRACE": str(out)} if which.startswith("torch") else {
                "TRACE_DIR": str(out), "TRACE_BACKEND_CACHE_ENABLED": "0"}
            run(prog, {**env, **(extra_env or {})}, d)
            (d / ".done").write_text("")
    return out


# A data-dependent branch inside a loop: both compilers give up on the frame (issue 18 (4)).
LOOP_PROGRAM = textwrap.dedent(
    """\
    import torch


    def f(x):
        for i in range(3):
            x = torch.sin(x)
            if x.sum() > 0:
                x = x + 1
        return x * 2


    cf = COMPILE
    cf(torch.randn(4))
    """
)

# The backend crashes the process (SIGSEGV) while compiling the second function (issue 18 (9)).
CRASH_PROGRAM = textwrap.dedent(
    """\
    import ctypes
    import torch


    def crash(gm, example_inputs):
        if any("cos" in str(n.target) for n in gm.graph.nodes):
            ctypes.string_at(0)
        return gm.forward


    def g(x):
        return torch.sin(x) + 1


    def h(x):
        return torch.cos(x) * 2


    COMPILE_G(torch.randn(3))
    COMPILE_H(torch.randn(3))
    """
)


def crash_trace(root: Path, which: str) -> Path:
    """CRASH_PROGRAM under torch.compile or compiler.compile: the process dies in h's compile."""
    import fcntl

    d = root / f"crash_{which}"
    d.mkdir(parents=True, exist_ok=True)
    out = d / "trace"
    wrap = ("torch.compile({}, backend=crash)" if which == "torch"
            else "__import__('tracetorch').compiler.compile({}, backend=crash)")
    with open(d / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (d / ".done").exists():
            prog = d / "prog.py"
            prog.write_text(CRASH_PROGRAM.replace("COMPILE_G", wrap.format("g"))
                            .replace("COMPILE_H", wrap.format("h")))
            env = {"TORCH_TRACE": str(out)} if which.startswith("torch") else {"TRACE_DIR": str(out)}
            base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": os.environ.get("HOME", "/root"), "PYTHONPATH": str(REPO)}
            proc = subprocess.run([sys.executable, str(prog)], env={**base, **env}, cwd=str(d),
                                  capture_output=True, text=True, timeout=600)
            assert proc.returncode < 0, f"the program should have crashed:\n{proc.stderr[-2000:]}"
            (d / ".done").write_text("")
    return out


# Three user lines fused into one kernel by inductor (issue 18 (8)).
INDUCTOR_PROGRAM = textwrap.dedent(
    """\
    import torch


    def f(x):
        y = torch.sin(x) + 1
        z = torch.relu(y) * 2
        return z.sum(dim=-1)


    cf = COMPILE
    cf(torch.randn(8, 16))
    """
)


def gpt_traces(root: Path) -> dict:
    """The issue-18 model (gpt_program.py: a print, a data-dependent branch, shape and dtype
    changes, a backend failing on the relu graph) under both compilers, once per test run:
    {"ours": debug run folder, "torch": TORCH_TRACE folder (inductor)}."""
    import fcntl

    prog = Path(__file__).with_name("gpt_program.py")
    d = root / "gpt"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (d / ".done").exists():
            base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "HOME": os.environ.get("HOME", "/root"), "PYTHONPATH": str(REPO),
                    "GPT_FAIL": "1"}
            for which, env in (
                    ("ours", {"TRACE_COMPILE_DEBUG": "1", "TRACE_COMPILE_DEBUG_DIR": str(d / "ours"),
                              "TRACE_REPRO_AFTER": "backend", "TRACE_BACKEND_CACHE_ENABLED": "0"}),
                    ("torch", {"TORCH_TRACE": str(d / "torch"), "GPT_BACKEND": "inductor"})):
                proc = subprocess.run([sys.executable, str(prog), which], env={**base, **env},
                                      cwd=str(d), capture_output=True, text=True, timeout=900)
                assert proc.returncode == 0, proc.stderr[-3000:]
            (d / ".done").write_text("")
    runs = sorted((d / "ours").glob("run_*"))
    return {"ours": runs[-1], "torch": d / "torch"}

INDUCTOR_PROVENANCE_PROGRAM = INDUCTOR_PROGRAM.replace(
    "cf = COMPILE", "import torch._inductor.config as ic\nic.trace.provenance_tracking_level = 1\n"
    "cf = COMPILE")
