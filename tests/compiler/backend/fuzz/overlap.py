"""Does an eager run write memory that the same op also reads through another view?

`a.add_(a[0])` with `a` transposed: the op writes `a` while it reads row 0 of the same memory,
so eager's answer depends on the order ATen visits the elements in (row 0 is doubled before or
after the later rows read it). ATen rejects such calls where it can see the overlap ("unsupported
operation: some elements of the input tensor and the written-to tensor refer to a single memory
location") and runs them anyway where its check gives up (non-dense views): the result is then
undefined, not a reference. Compiled code reads every input before it writes (functional
semantics, as Dynamo with inductor does), so such a program has no right answer to compare with.

`WritesReadOverlap` watches an eager run: for every op that writes a tensor argument, any other
tensor argument that shares memory with it at some element (but is not the same view) is
recorded in `found`.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def _elements(t: torch.Tensor) -> set:
    """The storage offsets of t's elements (fuzz tensors are small)."""
    if t.numel() == 0:
        return set()
    offsets = torch.tensor([t.storage_offset()])
    for size, stride in zip(t.shape, t.stride()):
        offsets = (offsets[:, None] + torch.arange(size)[None, :] * stride).reshape(-1)
    return set(offsets.tolist())


def _same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.storage_offset(), tuple(a.shape), a.stride()) == (b.storage_offset(), tuple(b.shape), b.stride())


def partial_overlap(written: torch.Tensor, read: torch.Tensor) -> bool:
    if written.device.type != "cpu" or read.device.type != "cpu":
        return False
    if written.untyped_storage().data_ptr() != read.untyped_storage().data_ptr() or _same_view(written, read):
        return False
    if written.element_size() != read.element_size():
        return True
    return bool(_elements(written) & _elements(read))


class WritesReadOverlap(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        written, read = [], []
        values = list(args) + [kwargs.get(a.name) for a in schema.arguments[len(args):]]
        for arg, value in zip(schema.arguments, values):
            if not isinstance(value, torch.Tensor):
                continue
            if arg.alias_info is not None and arg.alias_info.is_write:
                written.append(value)
            else:
                read.append(value)
        for w in written:
            for r in read:
                if partial_overlap(w, r):
                    self.found.append(f"{func}: writes memory that it also reads through another view")
        return func(*args, **kwargs)
