"""The aot stage: functionalize + decompose (inference), or joint forward/backward + partition
(training, compiler/aot/training.py). `aot_module(gm, example_inputs, inner_compile)` is the
entry point (docs/CONTRACTS.md section 3)."""

from tracetorch.compiler.aot.decompose import decomposition_table
from tracetorch.compiler.aot.inference import aot_module

__all__ = ["aot_module", "decomposition_table"]
