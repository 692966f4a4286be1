"""Artifact name -> PyTorch TORCH_TRACE envelope key, so call sites never spell envelope keys.

Where an artifact has the same meaning as a record PyTorch writes (and tlparse renders), it
travels under PyTorch's key; everything else (including our own events such as graph_break,
guard_failure, recompile, fusion_decision, kernel, perf_hint) travels as an `artifact` record
with `name` and `encoding` ("string" for text payloads, "json" otherwise).
"""
from __future__ import annotations

# artifact -> envelope key
DIRECT: dict[str, str] = {
    "graph": "dynamo_output_graph",
    "output_code": "inductor_output_code",
    "aot_joint_graph": "aot_joint_graph",
    "compile_metrics": "compilation_metrics",
}

# aot_graphs carries `graph=` forward / backward / inference (also accepted: kind=).
AOT_GRAPH_KEYS = {"forward": "aot_forward_graph", "backward": "aot_backward_graph",
                  "inference": "aot_inference_graph", "joint": "aot_joint_graph"}

# Records whose envelope value is the metadata itself, with no payload (PyTorch's layout).
METADATA_ONLY = {"compilation_metrics"}


def envelope_key(name: str, fields: dict, payload=None) -> str:
    if name == "guards":
        # tlparse reads dynamo_guards as a JSON list of {"code", "stack", "user_stack"} and
        # fails on anything else; readable text goes under the key it renders as text.
        return "dynamo_guards" if isinstance(payload, list) else "dynamo_cpp_guards_str"
    if name == "aot_graphs":
        which = fields.get("graph", fields.get("kind"))
        return AOT_GRAPH_KEYS.get(which, "artifact")
    return DIRECT.get(name, "artifact")


def envelope_for(name: str, payload, fields: dict) -> tuple[str, dict, object]:
    """(key, metadata, payload) of the trace record for artifact `name`."""
    key = envelope_key(name, fields, payload)
    if key == "artifact":
        encoding = "string" if payload is None or isinstance(payload, str) else "json"
        # name and encoding are the envelope's own: a field with that name keeps its value
        # under field_name / field_encoding instead of being overwritten
        meta = {(f"field_{k}" if k in ("name", "encoding") else k): v for k, v in fields.items()}
        return key, {**meta, "name": name, "encoding": encoding}, payload
    if key in METADATA_ONLY and isinstance(payload, dict):
        return key, {**payload, **fields}, None
    return key, dict(fields), payload
