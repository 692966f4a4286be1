"""The registry holds exactly DESIGN section 4's names, with descriptions and flags."""
from tracetorch.logs import registry

DESIGN_ARTIFACTS = {
    "bytecode", "graph", "graph_code", "graph_sizes", "graph_breaks", "guards", "verbose_guards",
    "recompiles", "recompiles_verbose", "trace_source", "trace_bytecode", "side_effects",
    "aot_graphs", "aot_joint_graph", "ir_pre_fusion", "ir_post_fusion", "schedule", "fusion",
    "output_code", "kernel_code", "perf_hints", "autotuning", "compile_metrics"}
DESIGN_OFF = {"bytecode", "ir_pre_fusion", "ir_post_fusion", "schedule", "fusion", "output_code",
              "kernel_code", "verbose_guards", "recompiles_verbose"}


def test_components_and_aliases():
    assert set(registry.COMPONENTS) == {"frontend", "aot", "backend", "dynamic", "cache", "minifier"}
    assert registry.ALIASES == {"dynamo": "frontend", "inductor": "backend"}
    assert all(c.description for c in registry.COMPONENTS.values())


def test_artifacts_descriptions_and_flags():
    assert set(registry.ARTIFACTS) == DESIGN_ARTIFACTS
    assert {a.name for a in registry.ARTIFACTS.values() if a.off_by_default} == DESIGN_OFF
    for art in registry.ARTIFACTS.values():
        assert art.description and art.component in registry.COMPONENTS


def test_trace_only_records_point_at_a_console_artifact():
    assert set(registry.TRACE_ONLY) >= {"graph_break", "guard_failure", "recompile",
                                        "fusion_decision", "kernel", "perf_hint"}
    assert set(registry.TRACE_ONLY.values()) <= set(registry.ARTIFACTS)
    assert not set(registry.TRACE_ONLY) & set(registry.ARTIFACTS)
