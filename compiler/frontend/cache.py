"""Cache entries and compile ids.

One `FrameCache` per compiled function object (a `compiler.compile` wrapper, or a resume function
or callee wrapped lazily by the same machinery). Its `entries` list is newest first and holds
`(check, run)` pairs that the hot path walks without touching anything else.

Compile ids follow Dynamo: `frame_id` numbers code objects in the order of their first compile
(process-wide, so a resume function gets its own), `frame_compile_id` counts the compiles of that
code object. `reset()` forgets all of it.
"""
from __future__ import annotations

import dataclasses
import threading
import types
import weakref

from tracetorch import logs
from tracetorch.compiler.frontend.guards import Guard, GuardSet

log = logs.get_logger(__name__)

_lock = threading.RLock()
_frame_ids: dict[types.CodeType, list[int]] = {}   # code -> [frame_id, compiles so far]
_next_frame_id = [0]
_all_caches: "weakref.WeakSet[FrameCache]" = weakref.WeakSet()


def next_compile_id(code: types.CodeType) -> logs.CompileId:
    with _lock:
        info = _frame_ids.get(code)
        if info is None:
            info = _frame_ids[code] = [_next_frame_id[0], 0]
            _next_frame_id[0] += 1
        cid = logs.CompileId(info[0], info[1])
        info[1] += 1
        return cid


@dataclasses.dataclass(eq=False)
class CacheEntry:
    compile_id: logs.CompileId
    guard_set: GuardSet
    run: object                    # the transformed function (capture's result.fn)
    graphs: list
    graph_breaks: list

    @property
    def guards(self) -> list[Guard]:
        return self.guard_set.guards


class FrameCache:
    """Everything remembered about one compiled function object."""

    def __init__(self, fn: types.FunctionType, options):
        self.fn = fn
        self.code = fn.__code__
        self.options = options
        self.entries: list[CacheEntry] = []
        self.fast: list[tuple] = []      # (check, run) newest first: what the hot path reads
                                         # (stale entries last, see refresh)
        # Automatic-dynamic marks belong to the code object (Dynamo's frame state), so every
        # function object of one code (e.g. each capture's resume function) shares them.
        self.dynamic = options.dynamic_dims_for(self.code)
        self.run_eagerly = False         # recompile limit hit (or skipped): misses run fn eagerly
        self.skipped = False             # the first capture found nothing to compile
        self.nested = False              # a resume function / callee (set by eval_frame)
        self.compiling = False
        with _lock:
            _all_caches.add(self)

    @property
    def name(self) -> str:
        return self.code.co_name

    @property
    def location(self) -> str:
        return f"{self.code.co_filename}:{self.code.co_firstlineno}"

    def add(self, entry: CacheEntry) -> None:
        self.entries.insert(0, entry)
        entry.guard_set.on_check_changed = self.refresh
        self.refresh()

    def refresh(self) -> None:
        """Rebuild the hot path's list after an entry's check changed (a watched module was
        mutated, or the entry re-validated). Entries with a current fast check come first,
        newest first; stale ones (whose check walks every guard source) after them: any entry
        whose guards pass is a correct choice, and this keeps a stale entry that no longer
        matches (e.g. the eval-mode entry while training) from costing a full walk per call."""
        fresh = [(e.guard_set.check, e.run) for e in self.entries if not e.guard_set.stale]
        stale = [(e.guard_set.check, e.run) for e in self.entries if e.guard_set.stale]
        self.fast[:] = fresh + stale     # in place: the hot path holds this very list

    def clear(self) -> None:
        self.entries.clear()
        self.fast.clear()     # in place: the hot path holds this very list
        self.dynamic.clear()
        self.run_eagerly = False
        self.skipped = False


def reset() -> None:
    """Forget every cache entry, compile id and dynamic mark (compiler.reset())."""
    with _lock:
        for cache in list(_all_caches):
            cache.clear()
        _frame_ids.clear()
        _next_frame_id[0] = 0
    log.debug("cache_reset")
