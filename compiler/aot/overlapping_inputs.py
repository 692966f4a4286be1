"""Graph inputs that share memory with an input the graph writes to ("synthetic bases").

The frontend hands a graph each tensor it reads as its own input, and after a graph break two of
them may be one memory: `v = a.unbind(0)[0]` before the break, `v.zero_(); return ~a` after it.
Functionalization treats every input as an independent value, so the compiled graph writes `v`
back at the end while `~a` reads `a` as it entered: eager sees the zeros, the compiled graph
does not.

AOTAutograd answers this with a synthetic base; so do we. At each call, when the graph writes
to an input, the runtime checks whether that input's storage is also another tensor input's
(`overlap_groups`). If so, the call runs a variant of the graph whose first input is the shared
storage as one flat tensor (the base) and whose overlapping inputs are rebuilt inside the graph
as `as_strided` views of it (`synthetic_base_module`). Functionalization then sees one value and
its views: a write through any of them reaches the others, and the write-back goes to the base,
which is the caller's memory. Variants are compiled for the call's exact sizes and offsets (a
cheap key) and kept per overlap pattern.
"""

from __future__ import annotations

import operator

import torch

from tracetorch import logs

log = logs.get_logger(__name__)


def _storage_range(t: torch.Tensor):
    """(first byte, one past the last byte) of t's whole storage, or None (no memory)."""
    try:
        st = t.untyped_storage()
    except (RuntimeError, NotImplementedError):   # sparse and other storage-less tensors
        return None
    lo = st.data_ptr()
    return (lo, lo + st.nbytes()) if lo else None


def tensor_positions(args) -> list[int]:
    return [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]


def overlap_groups(args, mutated, positions=None) -> tuple[tuple[int, ...], ...]:
    """Groups of tensor-input positions over one storage, for the storages of written inputs
    (empty when every written input's memory is its own: the usual case). A tensor's storage
    starts at data_ptr() - storage_offset() * element_size(): three C calls per input and one
    set, no storage object (an optimizer step passes hundreds of inputs, writes most of them and
    checks every step; storage objects and range scans cost it 1-25 ms per step on the H100's
    host). Tensors without a data pointer (sparse, ...) take the storage-range path."""
    if positions is None:
        positions = tensor_positions(args)
    try:
        ts = [args[i] for i in positions]
        bases = list(map(torch.Tensor.data_ptr, ts))
        offsets = list(map(torch.Tensor.storage_offset, ts))
        if any(offsets):      # (all at their storage's start, the usual case: the pointers are the bases)
            bases = list(map(operator.sub, bases, map(operator.mul, offsets, map(torch.Tensor.element_size, ts))))
    except (TypeError, IndexError):     # not the signature seen first: look again
        return overlap_groups(args, mutated, tensor_positions(args)) if positions else ()
    except RuntimeError:
        return _groups_by_range(args, mutated, positions)
    if len(set(bases)) == len(bases):
        return ()                       # every tensor input on a storage of its own
    where = dict(zip(positions, bases))
    written = {where[m] for m in mutated if m in where} - {0}
    groups: dict = {}
    for i, b in zip(positions, bases):
        if b in written:
            groups.setdefault(b, []).append(i)
    return tuple(tuple(g) for g in groups.values() if len(g) > 1)


def _groups_by_range(args, mutated, positions) -> tuple[tuple[int, ...], ...]:
    """overlap_groups through storage objects: a tensor is over a written input's storage when
    its data pointer lies in that storage's byte range."""
    ranges = []
    for m in mutated:
        a = args[m]
        if isinstance(a, torch.Tensor):
            r = _storage_range(a)
            if r is not None:
                ranges.append((r, m))
    members: dict = {}
    for r, m in ranges:
        members.setdefault(r, {m})
    for i in positions:
        try:
            p = args[i].data_ptr()
        except RuntimeError:
            continue
        for (lo, hi), group in members.items():
            if lo <= p < hi:
                group.add(i)
    return tuple(tuple(sorted(g)) for g in members.values() if len(g) > 1)


def variant_key(args, groups) -> tuple:
    """What a synthetic-base variant is compiled for: the groups and each member's layout."""
    return (groups,) + tuple((tuple(args[i].shape), args[i].stride(), args[i].storage_offset(), args[i].dtype)
                             for g in groups for i in g)


def unsupported_reason(args, groups) -> str:
    for g in groups:
        first = args[g[0]]
        if any(args[i].dtype != first.dtype for i in g):
            return "inputs sharing memory have different dtypes"
        if any(args[i].requires_grad for i in g):
            return "inputs sharing memory require grad"
    return ""


def base_of(t: torch.Tensor) -> torch.Tensor:
    """The whole storage under `t`, as a flat tensor of t's dtype (a view: writes reach t)."""
    n = t.untyped_storage().nbytes() // t.element_size()
    return t.as_strided((n,), (1,), 0)


def synthetic_base_module(gm: torch.fx.GraphModule, args, groups):
    """(gm', args'): gm' takes one base per group, then gm's other inputs in order, and rebuilds
    each group member as `as_strided(base, size, stride, offset)` of this call's layout."""
    in_group = {i: k for k, g in enumerate(groups) for i in g}
    graph = torch.fx.Graph()
    bases = [graph.placeholder(f"synthetic_base_{k}") for k in range(len(groups))]
    old = [n for n in gm.graph.nodes if n.op == "placeholder"]
    env = {}
    for i, n in enumerate(old):
        if i not in in_group:
            env[n] = graph.placeholder(n.name)
    for i, n in enumerate(old):
        if i in in_group:
            a = args[i]
            env[n] = graph.call_function(torch.as_strided, (bases[in_group[i]], tuple(a.shape), a.stride(),
                                                            a.storage_offset()))
    out = graph.graph_copy(gm.graph, env)
    graph.output(out)
    new = torch.fx.GraphModule(gm, graph)
    new_args = [base_of(args[g[0]]) for g in groups] + [a for i, a in enumerate(args) if i not in in_group]
    log.debug("aot_synthetic_base", groups=[list(g) for g in groups],
              reason="inputs share memory with an input the graph writes to: they become views of one base")
    return new, new_args


class OverlapVariants:
    """Per compiled graph: the synthetic-base variants, compiled on first need per overlap key.
    `compile_fn(gm', args')` compiles a variant the way the graph itself was compiled."""

    MAX_VARIANTS = 8

    def __init__(self, gm, mutated, metadata_mutated, compile_fn):
        self.gm = gm
        self.mutated = frozenset(mutated)
        self.metadata_mutated = frozenset(metadata_mutated)
        self.compile_fn = compile_fn
        self.variants: dict = {}
        self.positions = None    # tensor inputs, from the first call (the graph's signature)

    def variant_for(self, args):
        """None when no written input shares memory with another input (run the graph as
        compiled), else a callable taking the call's own arguments."""
        if self.positions is None:
            self.positions = tensor_positions(args)
        groups = overlap_groups(args, self.mutated, self.positions)
        if not groups:
            return None
        key = variant_key(args, groups)
        fn = self.variants.get(key)
        if fn is None:
            fn = self.variants[key] = self._build(args, groups)
        return fn

    def _build(self, args, groups):
        why = unsupported_reason(args, groups)
        if not why and self.metadata_mutated:
            # the plain call replays views of such inputs before and after the metadata replay;
            # a variant's outputs are re-aliased after it only
            why = "the graph also changes an input's sizes or strides in place"
        if not why and len(self.variants) >= self.MAX_VARIANTS:
            why = f"more than {self.MAX_VARIANTS} overlap patterns for one graph"
        if why:
            log.warning("aot_runs_eagerly", reason=why, groups=[list(g) for g in groups],
                        action="this overlap pattern runs the graph eagerly")
            return self.gm
        new_gm, new_args = synthetic_base_module(self.gm, args, groups)
        compiled = self.compile_fn(new_gm, new_args)
        log.info("aot_synthetic_base_compiled", groups=[list(g) for g in groups])
        return _SyntheticBaseCall(compiled, groups)


class _SyntheticBaseCall:
    """Calls a synthetic-base variant with the caller's arguments (bases first, then the rest)."""

    def __init__(self, compiled, groups):
        self.compiled = compiled
        self.firsts = [g[0] for g in groups]
        self.members = frozenset(i for g in groups for i in g)

    def __call__(self, *args):
        bases = [base_of(args[i]) for i in self.firsts]
        return self.compiled(*bases, *(a for i, a in enumerate(args) if i not in self.members))
