"""Functionalization for the inference path: no mutation inside the traced graph.

`functional_flat_fn(gm)` returns a function of the graph inputs that runs `gm` under
torch.func.functionalize (remove="mutations"): in-place ops become their functional variants, and
a mutated graph input gets a `copy_` from its final value at the very end of the traced graph
(the write-back). The function returns the flattened outputs; `spec` (filled when traced) is
the pytree spec to rebuild the original output structure. While it runs, each FX node's meta
(stack_trace, ...) is made current, so every aten node traced from it inherits its provenance.

Inputs whose elements share memory (expanded: stride 0) are the one place where the functional
model differs from eager's memory: functionalization treats each element as its own value, so
`x[-1:].fill_(v)` on `x = b.expand(4, 3)` changes only the last row, while eager's write reaches
every row (they are one row of memory). After any node that changed such an input, the input is
re-synchronized (`_resync`): each memory location takes the value written to one of its
elements, so later reads and the final write-back see eager's values.
"""

from __future__ import annotations

import operator

import torch
import torch.fx.traceback as fx_traceback
from torch.utils import _pytree as pytree

from tracetorch import logs

_log = logs.get_logger(__name__)


#: in-place methods that change only metadata or copy nothing into the tensor's elements
_METADATA_INPLACE = {"as_strided_", "detach_", "resize_", "resize_as_", "squeeze_", "unsqueeze_", "swapaxes_",
                     "swapdims_", "t_", "transpose_", "set_", "requires_grad_", "share_memory_"}

#: calls whose result is its first argument expanded (elements sharing memory)
_EXPANDS = {"expand", "expand_as", "broadcast_to", torch.Tensor.expand, torch.Tensor.expand_as,
            torch.broadcast_to, torch.Tensor.broadcast_to}

_SDPA = {torch.nn.functional.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention}
_LINEAR = {torch.nn.functional.linear, torch._C._nn.linear}


def _symbolic_linear(x, weight, bias=None):
    """F.linear on an input with symbolic sizes, as the ops its C++ kernel would run (a flattened
    addmm for a contiguous input with a bias, else matmul and add). Under functionalize the C++
    kernel reads plain sizes, which pins every symbolic size of the input to its example value:
    BERT recompiled for each batch size."""
    if x.dim() >= 3 and bias is not None and x.is_contiguous():
        flat = torch.addmm(bias, x.reshape(-1, x.shape[-1]), weight.t())
        return flat.view(*x.shape[:-1], weight.shape[0])
    out = torch.matmul(x, weight.t())
    return out if bias is None else out + bias


def _has_symbolic_size(t) -> bool:
    return isinstance(t, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in t.shape)


def _shared_dims(t) -> list[int]:
    """Dims along which a tensor's elements share memory (a static stride 0 and size > 1)."""
    return [d for d, (n, st) in enumerate(zip(t.shape, t.stride()))
            if type(st) is int and st == 0 and not (type(n) is int and n <= 1)]


def _resync(new: torch.Tensor, old: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """`new` with the elements that share a location (along `dims`) made equal: each location
    takes the last element along the dims that differs from its old value (`old`, consistent
    already), or the old value if none does. Eager's last write wins; the functional value does
    not record the order of writes, so this matches eager when one element per location was
    written or all were written with one value (zero_, fill_, a write along another dim)."""
    shape = new.shape
    for d in dims:
        base = old.narrow(d, 0, 1)
        changed = new != base
        if new.dtype.is_floating_point or new.dtype.is_complex:
            changed = changed & ~(torch.isnan(new) & torch.isnan(base))
        view = [1] * new.dim()
        view[d] = -1
        order = torch.arange(1, new.shape[d] + 1, device=new.device).view(view)
        last = (changed.to(torch.int64) * order).amax(d, keepdim=True)
        picked = torch.gather(new, d, (last - 1).clamp(min=0))
        new = torch.where(last > 0, picked, base)
        old = base
    return new.expand(shape)


class _Interp(torch.fx.Interpreter):
    def run(self, *args, **kwargs):
        # functional input -> (shared dims, its last synchronized inner tensor, its value then)
        self._shared = {}
        self._expanded = {}        # id(expanded tensor) -> (it, the tensor it expands)
        # id(view of an expanded tensor E) -> (the view, E, f: f(E) rebuilds the view from E);
        # tuples of views (unbind, split) too: a write into such a view is a write into E
        self._views = {}
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and torch._is_functional_tensor(a) and _shared_dims(a):
                self._shared[i] = (a, _shared_dims(a), torch._from_functional_tensor(a), a.clone())
        return super().run(*args, **kwargs)

    def run_node(self, n):
        with fx_traceback.set_current_meta(n):
            out = super().run_node(n)
            if n.target in _EXPANDS and isinstance(out, torch.Tensor) and isinstance(n.args[0], torch.fx.Node):
                self._expanded[id(out)] = (out, self.env[n.args[0]])
                self._views[id(out)] = (out, out, lambda e: e)
            elif self._views and n.args and isinstance(n.args[0], torch.fx.Node):
                self._note_view(n, out)
            if self._shared and n.op not in ("placeholder", "output"):
                self._resync_shared(n)
            return out

    def _note_view(self, n, out):
        """Track `out` when it is a view (or a tuple of views) of a tracked view of an expand."""
        parent = self.env[n.args[0]]
        entry = self._views.get(id(parent))
        if entry is None or entry[0] is not parent or out is parent:
            # (an in-place write returns the tensor it wrote: no new view, and its entry stays)
            return
        _, root, rebuild_parent = entry
        if n.op == "call_function" and n.target is operator.getitem and isinstance(parent, (tuple, list)):
            k = n.args[1]
            rebuild = (lambda e, f=rebuild_parent, k=k: f(e)[k])
        elif n.op in ("call_function", "call_method") and isinstance(parent, torch.Tensor):
            tensors = out if isinstance(out, (tuple, list)) else [out]
            if not tensors or not all(isinstance(t, torch.Tensor) and torch._C._is_alias_of(t, parent)
                                      for t in tensors):
                return
            rest, kwargs, target = tuple(self.map_nodes_to_values(n.args[1:], n)), \
                self.map_nodes_to_values(n.kwargs, n), n.target
            if n.op == "call_method":
                rebuild = (lambda e, f=rebuild_parent: getattr(f(e), target)(*rest, **kwargs))
            else:
                rebuild = (lambda e, f=rebuild_parent: target(f(e), *rest, **kwargs))
        else:
            return
        self._views[id(out)] = (out, root, rebuild)

    def _resync_shared(self, n):
        for i, (x, dims, inner, old) in list(self._shared.items()):
            if not torch._functionalize_has_data_mutation(x):
                continue
            torch._sync(x)
            if torch._from_functional_tensor(x) is inner:
                continue           # nothing changed since the last synchronization
            with torch.no_grad():
                value = _resync(x.clone(), old, dims)
                x.copy_(value)
            torch._sync(x)
            self._shared[i] = (x, dims, torch._from_functional_tensor(x), value.clone())
            _log.debug("aot_shared_input_resync", node=n.name, input=i,
                       reason="an input whose elements share memory was written: one value per location")

    def call_method(self, target, args, kwargs):
        if isinstance(target, str) and target.endswith("_") and target not in _METADATA_INPLACE:
            return self._write_shared_view(super().call_method, target, args, kwargs)
        return super().call_method(target, args, kwargs)

    def _write_shared_view(self, call, target, args, kwargs):
        """An in-place write into an `expand` of another tensor (its elements share memory):
        functionalization reflects a write to an expanded view into its base as `base +
        sum_to(view - base)` (expand's inverse), which adds each copy's change once per copy:
        `b.expand(2, n).masked_fill_(m, -1)` gave base + 2 * (-1 - base), eager -1 (and the
        subtraction rounds floats). Here the write runs on a private copy, its copies are made one
        value per location (`_resync`, as for expanded inputs), and that value is copied into the
        expanded tensor's source directly, so the view is regenerated from it without the sum.
        Graph inputs with shared dims are resynced after the node instead."""
        t = args[0] if args else None
        view = self._views.get(id(t)) if isinstance(t, torch.Tensor) else None
        if view is None or view[0] is not t:
            return call(target, args, kwargs)
        e, rebuild = view[1], view[2]
        entry = self._expanded.get(id(e))
        if entry is None or entry[0] is not e or not _shared_dims(e):
            return call(target, args, kwargs)
        src = entry[1]
        with torch.no_grad():
            # the write runs on a private copy of the whole expand, through the same views
            scratch = e.clone()
            call(target, (rebuild(scratch),) + tuple(args[1:]), kwargs)
            value = _resync(scratch, e.clone(), _shared_dims(e))
            lead = e.dim() - src.dim()
            value = value[(0,) * lead]
            for d, n in enumerate(src.shape):
                if n == 1:
                    value = value.narrow(d, 0, 1)
            src.copy_(value)
        _log.debug("aot_shared_view_write", method=str(target),
                   reason="a write into an expanded view goes to its source once per memory location")
        return t

    def call_function(self, target, args, kwargs):
        if target is operator.setitem:
            return self._write_shared_view(super().call_function, target, args, kwargs)
        # attention is kept whole: one tracetorch::sdpa node (torch picks its fused kernel at run
        # time) instead of the decomposition scaled_dot_product_attention would trace into
        if target in _LINEAR and len(args) >= 2 and _has_symbolic_size(args[0]) and args[0].dim() > 2:
            return _symbolic_linear(*args, **kwargs)
        if target in _SDPA and not kwargs.get("enable_gqa", False):
            from tracetorch.compiler.aot.decompose import sdpa_call
            out = sdpa_call(*args, **kwargs)
            if out is not NotImplemented:
                return out
        return super().call_function(target, args, kwargs)


class FlatFunction:
    """Callable f(*inputs) -> flat list of outputs, recording the output spec when traced.

    `alias_inputs`: positions of inputs that in-place metadata ops (t_, unsqueeze_, as_strided_)
    change. The graph runs on an alias of each (a view in the functional world): the op changes
    the alias's metadata only, data writes through it reach the input as it entered (the write-back
    copies into the caller's tensor with its entry sizes), and functionalize has no metadata change
    of an input to propagate (it would `as_strided_` the traced fake and, at run time, the caller's
    tensor to the functional value's strides, not eager's). The runtime replays the metadata ops
    on the caller's tensor after the call (aliases.input_metadata_mutations)."""

    def __init__(self, gm: torch.fx.GraphModule, alias_inputs=()):
        self.gm = gm
        self.spec = None
        self.alias_inputs = frozenset(alias_inputs)

    def __call__(self, *args):
        if self.alias_inputs:
            args = tuple(torch.ops.aten.alias.default(a) if i in self.alias_inputs and isinstance(a, torch.Tensor)
                         else a for i, a in enumerate(args))
        out = _Interp(self.gm).run(*args)
        flat, self.spec = pytree.tree_flatten(out)
        return flat


def functional_flat_fn(gm: torch.fx.GraphModule, alias_inputs=()):
    flat = FlatFunction(gm, alias_inputs)
    return torch.func.functionalize(flat, remove="mutations"), flat


def mutated_positions(traced: torch.fx.GraphModule) -> tuple[int, ...]:
    """Input positions a functionalized trace writes back to (copy_ into a placeholder)."""
    placeholders = {n: i for i, n in enumerate(n for n in traced.graph.nodes if n.op == "placeholder")}
    hits = {placeholders[n.args[0]] for n in traced.graph.nodes
            if n.op == "call_function" and n.target is torch.ops.aten.copy_.default
            and n.args and n.args[0] in placeholders}
    return tuple(sorted(hits))
