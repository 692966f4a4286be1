"""Input metadata for repro scripts: describe graph inputs, and regenerate them from a seed.

A repro script never carries tensor values by default: it carries each input's metadata (shape,
stride, dtype, device, requires_grad, storage offset) and regenerates values from a seed, so the
script stays one small readable file. Real values are saved next to it with `torch.save` only
when the user asks (config `repro.save_real_inputs`), for failures that depend on the data.

Specs are plain JSON-able dicts so they can be written as Python literals into the script.
"""

from __future__ import annotations

from typing import Any

import torch


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def dtype_from_name(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r} in repro input metadata")
    return dtype


def tensor_spec(t: torch.Tensor) -> dict:
    """Metadata of a real (or fake) tensor, enough to regenerate one with the same layout."""
    spec = {
        "kind": "tensor",
        "shape": [int(s) for s in t.shape],
        "stride": [int(s) for s in t.stride()],
        "dtype": _dtype_name(t.dtype),
        "device": str(t.device),
        "requires_grad": bool(t.requires_grad),
    }
    offset = int(t.storage_offset())
    if offset:
        spec["storage_offset"] = offset
    return spec


def value_spec(v: Any) -> dict:
    """Spec of one graph input value (tensor, python scalar, SymInt with its hint, None)."""
    if isinstance(v, torch.Tensor):
        return tensor_spec(v)
    if isinstance(v, bool):
        return {"kind": "bool", "value": v}
    if isinstance(v, int):
        return {"kind": "int", "value": v}
    if isinstance(v, float):
        return {"kind": "float", "value": v}
    if isinstance(v, torch.SymInt):
        # Repros specialise symbolic sizes to the hint seen at failure time.
        return {"kind": "int", "value": int(v.node.hint) if v.node.hint is not None else 1}
    if v is None:
        return {"kind": "none"}
    if isinstance(v, (list, tuple)) and all(isinstance(x, (int, float, bool)) for x in v):
        return {"kind": "list", "value": list(v)}
    return {"kind": "unsupported", "type": type(v).__qualname__, "repr": repr(v)[:200]}


def describe(spec: dict) -> str:
    """One-line human description, used in comments of the repro script."""
    if spec["kind"] == "tensor":
        shape = "x".join(str(s) for s in spec["shape"]) or "scalar"
        grad = ", requires_grad" if spec.get("requires_grad") else ""
        return f"{spec['dtype']}[{shape}] stride={tuple(spec['stride'])} on {spec['device']}{grad}"
    if spec["kind"] == "none":
        return "None"
    if spec["kind"] == "unsupported":
        return f"unsupported {spec['type']}"
    return f"{spec['kind']} {spec['value']!r}"


def _storage_size(shape, stride, offset) -> int:
    if any(s == 0 for s in shape):
        return offset
    return offset + 1 + sum((s - 1) * st for s, st in zip(shape, stride))


def _random_buffer(n: int, dtype: torch.dtype, device: str, gen: torch.Generator) -> torch.Tensor:
    # Values are chosen so that ordinary float graphs stay finite: normal floats, small ints.
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=gen).to(device=device, dtype=dtype)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(n, generator=gen, dtype=torch.float64).to(device=device, dtype=dtype)
    if dtype == torch.uint8:
        return torch.randint(0, 8, (n,), generator=gen).to(device=device, dtype=dtype)
    return torch.randint(0, 8, (n,), generator=gen).to(device=device, dtype=dtype)


def make_tensor(spec: dict, gen: torch.Generator) -> torch.Tensor:
    dtype = dtype_from_name(spec["dtype"])
    device = spec.get("device", "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"this repro needs device {device!r}, which is not available here")
    shape, stride = spec["shape"], spec["stride"]
    offset = spec.get("storage_offset", 0)
    buf = _random_buffer(_storage_size(shape, stride, offset), dtype, device, gen)
    t = torch.as_strided(buf, shape, stride, offset)
    if spec.get("requires_grad") and (dtype.is_floating_point or dtype.is_complex):
        t.requires_grad_(True)
    return t


def make_value(spec: dict, gen: torch.Generator) -> Any:
    kind = spec["kind"]
    if kind == "tensor":
        return make_tensor(spec, gen)
    if kind in ("int", "float", "bool"):
        return spec["value"]
    if kind == "list":
        return list(spec["value"])
    if kind == "none":
        return None
    raise RuntimeError(f"cannot regenerate an input of type {spec.get('type')}: {spec.get('repr')}")


def make_inputs(specs: list[dict], seed: int, real: list | None = None) -> list:
    """Regenerate inputs; the same (specs, seed) always gives the same values. A spec with
    `real_index` takes that entry of `real` (values saved with torch.save) when given."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for s in specs:
        value = make_value(s, gen) if s["kind"] != "unsupported" or real is None else None
        if real is not None and "real_index" in s:
            value = real[s["real_index"]]
        out.append(value)
    return out


def clone_inputs(values: list) -> list:
    """Copies that keep strides, so a graph that mutates its inputs does not change the originals."""
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            c = torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device)
            with torch.no_grad():
                c.copy_(v)
            c.requires_grad_(v.requires_grad)
            out.append(c)
        else:
            out.append(v)
    return out
