"""TRACE_COMPILE_DEBUG=1: the debug dump folder (DESIGN section 6), built from the event stream.

Nothing here asks the compiler for anything: a `logs` sink receives every event (all components
at DEBUG, every artifact) and files them by compile id:

    run_.../config.yaml     effective configuration        run_.../trace.log   structured trace
    run_.../debug.log       every event, console format    run_.../index.txt   one entry per compile id
    run_.../<frame>_<compile>[_<attempt>]/<files named in ARTIFACT_FILES>

A stage that has not run emitted nothing, so it simply has no file. `fx_graph_runnable.py` is
the one file not built from an event: the frontend-stage compiler wrapper (`wrap`) renders the
captured graph as a standalone script, since a runnable script needs the graph object itself.
"""

from __future__ import annotations

import json
import linecache
import logging
import os
import threading

from tracetorch import logs
from tracetorch.logs.render import render

log = logs.get_logger(__name__)

# artifact / trace-only record name -> file in the compile id's folder
ARTIFACT_FILES = {
    "guards": "guards.txt",
    "graph_breaks": "graph_breaks.txt",
    "recompiles": "recompile_reasons.txt",
    "graph_code": "fx_graph_readable.py",
    "graph": "fx_graph_table.txt",
    "graph_sizes": "fx_graph_sizes.txt",
    "side_effects": "side_effects.txt",
    "aot_joint_graph": "aot_joint.py",
    "ir_pre_fusion": "ir_pre_fusion.txt",
    "ir_post_fusion": "ir_post_fusion.txt",
    "schedule": "schedule.txt",
    "fusion": "fusion.txt",
    "output_code": "output_code.py",
    "kernel_code": "kernels.txt",
    "perf_hints": "perf_hints.txt",
    "compile_metrics": "compile_metrics.json",
}
AOT_FILES = {"forward": "aot_forward.py", "inference": "aot_forward.py", "backward": "aot_backward.py",
             "joint": "aot_joint.py", "partition": "aot_partition.txt"}
BYTECODE_FILES = {"original": "original_bytecode.txt", "transformed": "transformed_bytecode.txt"}
# Structured records whose readable twin (the artifact on the right) may not be emitted:
# used for the file only when the twin never arrived for that compile id.
JSON_TWINS = {"graph_break": "graph_breaks", "recompile": "recompiles"}
# Emitted just before a compile id starts (the reasons for it): filed under the next compile id.
PRE_COMPILE = {"recompiles", "recompile", "recompiles_verbose", "guard_failure"}

_lock = threading.RLock()
_active: "DebugFolder | None" = None


def _text(payload) -> str:
    if payload is None:
        return ""
    if isinstance(payload, str):
        return payload
    return json.dumps(payload, indent=2, default=repr)


class _Entry:
    def __init__(self, cid):
        self.cid = cid
        self.function = None
        self.location = None
        self.statuses: list[str] = []
        self.files: list[str] = []
        self.seen: set[str] = set()

    def status(self) -> str:
        return ", ".join(self.statuses) if self.statuses else "ok"

    def mark(self, status: str) -> None:
        if status not in self.statuses:
            self.statuses.append(status)


class DebugFolder:
    def __init__(self, run_dir: str):
        from tracetorch.compiler import config

        self.run_dir = run_dir
        self.entries: dict[str, _Entry] = {}
        self.counts: dict[tuple[str, str], int] = {}
        self.pending: list = []
        with open(os.path.join(run_dir, "config.yaml"), "w", encoding="utf-8") as f:
            f.write(config.to_yaml())
        self.debug_log = open(os.path.join(run_dir, "debug.log"), "a", encoding="utf-8")
        self.trace = logs.open_trace(os.path.join(run_dir, "trace.log"))
        logs.add_sink(self.on_event, level=logging.DEBUG, artifacts="all")
        self._write_index()

    def close(self) -> None:
        logs.remove_sink(self.on_event)
        logs.close_trace(self.trace)
        self.debug_log.close()

    # -- files ----------------------------------------------------------------------------------
    def folder(self, cid) -> str:
        path = os.path.join(self.run_dir, cid.folder_name)
        os.makedirs(path, exist_ok=True)
        return path

    def entry(self, cid) -> _Entry:
        key = str(cid)
        if key not in self.entries:
            self.entries[key] = _Entry(cid)
        return self.entries[key]

    def write_file(self, cid, filename: str, text: str, *, replace: bool = False, header: str | None = None) -> str:
        """Append (or replace) a compile id's file; repeated artifacts get a separator line."""
        path = os.path.join(self.folder(cid), filename)
        key = (str(cid), filename)
        n = 0 if replace else self.counts.get(key, 0)
        with open(path, "w" if n == 0 else "a", encoding="utf-8") as f:
            if n:
                f.write("\n\n")
            if header:
                f.write(header.rstrip() + "\n")
            f.write(text.rstrip("\n") + "\n")
        self.counts[key] = n + 1
        entry = self.entry(cid)
        if filename not in entry.files:
            entry.files.append(filename)
        return path

    # -- the sink ---------------------------------------------------------------------------------
    def on_event(self, event) -> None:
        with _lock:
            try:
                self.debug_log.write(render(event, "console") + "\n")
                self.debug_log.flush()
            except Exception:
                pass
            cid = event.compile_id
            if cid is None:
                # The frontend decides to recompile before the new compile id exists: keep the
                # reasons for the next compile id (the recompile they caused).
                if event.kind == "artifact" and event.name in PRE_COMPILE:
                    self.pending.append(event)
                return
            if self.pending:
                pending, self.pending = self.pending, []
                for early in pending:
                    self._artifact(cid, early)
            if event.kind == "artifact":
                self._artifact(cid, event)
            elif event.name in ("frame_compile_failed", "backend_compile_failed"):
                self.entry(cid).mark("failed")
                self._write_index()

    def _artifact(self, cid, event) -> None:
        name, fields, entry = event.name, event.fields, self.entry(cid)
        entry.seen.add(name)
        header = None
        if name == "bytecode":
            which = fields.get("which") or fields.get("kind") or (
                "transformed" if "original_bytecode.txt" in entry.files else "original")
            filename = BYTECODE_FILES.get(which, f"{which}_bytecode.txt")
        elif name == "aot_graphs":
            which = fields.get("graph") or fields.get("kind") or "forward"
            filename = AOT_FILES.get(which, f"aot_{which}.py")
            if which == "inference":
                header = "# inference graph (no backward was needed)"
        elif name in JSON_TWINS:
            if JSON_TWINS[name] in entry.seen:
                self._status_from(name, entry)
                return
            filename = ARTIFACT_FILES[JSON_TWINS[name]]
        elif name in ARTIFACT_FILES:
            filename = ARTIFACT_FILES[name]
        else:
            self._status_from(name, entry)
            return
        if name == "compile_metrics":
            self._metrics(cid, entry, event.payload if isinstance(event.payload, dict) else {})
            self.write_file(cid, filename, _text(event.payload), replace=True)
        elif name == "output_code" and filename not in entry.files:
            self.write_file(cid, filename, _with_bootstrap(_text(event.payload)))
        else:
            self.write_file(cid, filename, _text(event.payload), header=header)
        self._status_from(name, entry)
        self._write_index()

    def _status_from(self, name: str, entry: _Entry) -> None:
        if name in ("graph_break", "graph_breaks"):
            entry.mark("graph break")
        elif name in ("recompile", "recompiles"):
            entry.mark("recompile")

    def _metrics(self, cid, entry: _Entry, m: dict) -> None:
        filename, lineno = m.get("co_filename"), m.get("co_firstlineno")
        entry.function = m.get("co_name") or entry.function
        if filename:
            entry.location = f"{filename}:{lineno}"
        if m.get("fail_type"):
            entry.mark("failed")
        if m.get("graph_break_count"):
            entry.mark("graph break")
        if m.get("recompile_reason"):
            entry.mark("recompile")
        if filename and lineno and "source.py" not in entry.files:
            src = source_with_range(filename, int(lineno), entry.function, str(cid))
            if src:
                self.write_file(cid, "source.py", src, replace=True)

    def mark(self, cid, status: str) -> None:
        with _lock:
            self.entry(cid).mark(status)
            self._write_index()

    def add_file(self, cid, filename: str, text: str) -> str:
        with _lock:
            path = self.write_file(cid, filename, text, replace=True)
            self._write_index()
            return path

    def _write_index(self) -> None:
        lines = [f"tracetorch debug run: {self.run_dir}",
                 "files of the run: config.yaml trace.log debug.log index.txt"
                 + (" explain.txt" if os.path.exists(os.path.join(self.run_dir, "explain.txt")) else "")
                 + (" repro/" if os.path.isdir(os.path.join(self.run_dir, "repro")) else ""), ""]
        for key, e in self.entries.items():
            where = e.location or "?"
            lines.append(f"[{key}] {e.function or '?'} ({where})  status: {e.status()}")
            lines.append(f"    folder: {e.cid.folder_name}/")
            lines.append(f"    files: {' '.join(sorted(e.files)) or '(none)'}")
        tmp = os.path.join(self.run_dir, f".index.txt.tmp{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, os.path.join(self.run_dir, "index.txt"))


_TRACETORCH_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _with_bootstrap(code: str) -> str:
    """Output code imports tracetorch's runtime: make the debug-folder copy find the checkout it
    was written from when tracetorch is not installed, so `python output_code.py` just runs."""
    boot = ("import sys as _tt_sys  # debug-folder copy: find tracetorch if it is not installed\n"
            "try:\n    import compiler as _tt_compiler  # noqa: F401\n"
            f"except ImportError:\n    _tt_sys.path.insert(0, {_TRACETORCH_ROOT!r})\n")
    lines = code.splitlines(keepends=True)
    # `from __future__` imports must stay first: insert after them (and the docstring before them).
    cut = 0
    for i, line in enumerate(lines):
        if line.startswith("from __future__"):
            cut = i + 1
    return "".join(lines[:cut]) + boot + "".join(lines[cut:])


def source_with_range(filename: str, firstlineno: int, function: str | None, cid: str) -> str | None:
    """The function's source (valid Python), with its first and last compiled lines marked."""
    import inspect

    lines = linecache.getlines(filename)
    if not lines or firstlineno > len(lines):
        return None
    try:
        block = inspect.getblock(lines[firstlineno - 1:])
    except Exception:
        block = lines[firstlineno - 1:firstlineno]
    last = firstlineno + len(block) - 1
    head = [f"# compile id {cid}: {function or '?'} from {filename}",
            f"# compiled range: lines {firstlineno}-{last} (marked >>> below)", ""]
    body = []
    for i, text in enumerate(block):
        no = firstlineno + i
        body.append(f"{text.rstrip()}  # >>> {no}" if text.strip() else text.rstrip())
    return "\n".join(head + body) + "\n"


# -- activation --------------------------------------------------------------------------------------
def active() -> "DebugFolder | None":
    return _active


def start() -> DebugFolder:
    """Open this process's debug folder (idempotent)."""
    global _active
    with _lock:
        if _active is None:
            from tracetorch.debug import run_dir

            _active = DebugFolder(run_dir.get_run_dir())
            log.warning("compile_debug_folder", path=_active.run_dir)
        return _active


def stop() -> None:
    global _active
    with _lock:
        if _active is not None:
            _active.close()
            _active = None


def on_explain(report) -> None:
    folder = active()
    if folder is None:
        return
    with _lock:
        with open(os.path.join(folder.run_dir, "explain.txt"), "a", encoding="utf-8") as f:
            f.write(str(report).rstrip() + "\n\n")
        folder._write_index()


def wrap(compile_fn, stage: str):
    """Compiler wrapper: fx_graph_runnable.py for each captured graph; 'failed' status on errors."""

    def compile_with_debug_folder(gm, example_inputs):
        folder = active()
        if folder is None:
            return compile_fn(gm, example_inputs)
        cid = logs.current_compile_id()
        if stage == "frontend" and cid is not None:
            _write_runnable(folder, cid, gm, example_inputs, compile_fn)
        try:
            return compile_fn(gm, example_inputs)
        except Exception:
            if cid is not None:
                folder.mark(cid, "failed")
            raise

    compile_with_debug_folder.__wrapped__ = compile_fn
    return compile_with_debug_folder


def _write_runnable(folder: DebugFolder, cid, gm, example_inputs, compile_fn) -> None:
    from tracetorch.compiler import config
    from tracetorch.debug import graph_code, repro_writer
    from tracetorch.debug.repro_wrapper import compiler_target

    try:
        text, _ = repro_writer.render_script(
            gm, gm.graph, list(example_inputs), stage="frontend", compiler=compiler_target(compile_fn, "frontend"),
            config=config.to_dict(), failure=None, accuracy=True, title="fx_graph_runnable", compile_id=str(cid))
    except graph_code.ReproUnsupported as e:
        text = f"# fx_graph_runnable.py could not be written for this graph: {e}\n"
    except Exception as e:  # the dump must never break compilation
        log.warning("fx_graph_runnable_failed", error=f"{type(e).__name__}: {e}")
        return
    # Graph breaks give one frame several graphs: keep each (fx_graph_runnable_1.py, ...).
    n = sum(1 for f in folder.entry(cid).files if f.startswith("fx_graph_runnable"))
    folder.add_file(cid, "fx_graph_runnable.py" if n == 0 else f"fx_graph_runnable_{n}.py", text)
