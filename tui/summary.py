"""`tracetui --summary PATH`: the overview and every break and recompile reason as plain text."""

from __future__ import annotations

from tracetorch.tui.extract import one_line
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
        said_breaks: dict[tuple, str] = {}  # a break every recompile of the frame repeats: once
        for c in f.compiles:
            extra = f", {c.kernel_count} kernels" if c.kernel_count else ""
            time = f", {c.compile_time:.3f} s" if c.compile_time else ""
            out.append(f"  {c.id}: {', '.join(c.flags)}{extra}{time}")
            if c.failure:
                out.append(f"    failure: {c.failure}")
            if c.skipped:
                out.append("    frame skipped: capture gave up on this function, it runs eagerly"
                           + (f" ({c.skip_reason})" if c.skip_reason else ""))
            for b in c.breaks:
                key = (b.filename, b.lineno, b.reason)
                if key in said_breaks:
                    out.append(f"    graph break: the same as {said_breaks[key]}")
                    continue
                said_breaks[key] = c.id
                where = f" at {b.filename}:{b.lineno}" if b.filename else ""
                rid = f" [{b.reason_id}]" if b.reason_id else ""
                out.append(f"    graph break{where}{rid}: {b.reason.splitlines()[0] if b.reason else '?'}")
            if not c.breaks:
                for r in c.restart_reasons:
                    out.append(f"    restart: {r.splitlines()[0]}")
            older = 0
            for r in c.reasons:
                if r.seen_before:  # an older cache entry's reason, printed for an earlier compile
                    older += 1
                    continue
                gf = r.first
                where = f" (guard from {gf.user_location}" + (
                    f": {gf.user_code})" if gf.user_code else ")") if gf.user_location else ""
                change = f"; changed {gf.change}" if gf.change else ""
                out.append(f"    recompile: {one_line(gf.what or gf.guard or gf.text, 200)}{change}{where}"
                           f" [entries {', '.join(r.entries) or '?'}]")
            if older:
                out.append(f"    (+{older} older reason{'s' if older > 1 else ''} already listed above)")
    if not model.frames:
        out.append("no compiles in this trace")
    return "\n".join(out) + "\n"
