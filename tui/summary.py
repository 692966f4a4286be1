"""`tracetui --summary PATH`: the overview and every break and recompile reason as plain text."""

from __future__ import annotations

from tracetorch.tui.model import TraceModel


def summary_text(model: TraceModel, shown: str) -> str:
    t = model.totals
    out = [f"trace: {shown}",
           f"{t.frames} frames, {t.compiles} compiles, {t.graphs} graphs, {t.breaks} graph breaks, "
           f"{t.recompiles} recompiles, {t.failures} failed, {t.kernels} kernels, "
           f"{t.compile_time:.2f} s compile time, {t.events} events"]
    if model.trace.skipped or model.trace.damaged:
        out.append(f"problems: {len(model.trace.skipped)} records skipped, "
                   f"{len(model.trace.damaged)} damaged")
        out += [f"  line {ln}: {why}" for ln, why in (model.trace.skipped + model.trace.damaged)[:50]]
    out.append("")
    for f in model.frames:
        out.append(f"frame {f.frame_id}: {f.name} {f.location}".rstrip())
        for c in f.compiles:
            extra = f", {c.kernel_count} kernels" if c.kernel_count else ""
            time = f", {c.compile_time:.3f} s" if c.compile_time else ""
            out.append(f"  {c.id}: {', '.join(c.flags)}{extra}{time}")
            if c.failure:
                out.append(f"    failure: {c.failure}")
            for b in c.breaks:
                where = f" at {b.filename}:{b.lineno}" if b.filename else ""
                out.append(f"    graph break{where}: {b.reason.splitlines()[0] if b.reason else '?'}")
            if not c.breaks:
                for r in c.restart_reasons:
                    out.append(f"    restart: {r.splitlines()[0]}")
            for r in c.recompile_reasons:
                detail = (f" (expected {r.expected}, actual {r.actual})"
                          if r.expected and "expected" not in r.text else "")
                out.append(f"    recompile: guard of {r.entry or '?'} failed: {r.text}{detail}")
    if not model.frames:
        out.append("no compiles in this trace")
    return "\n".join(out) + "\n"
