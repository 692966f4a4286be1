"""The aot stage: functionalize + decompose (inference), or joint forward/backward + partition
(training, compiler/aot/training.py). `aot_module(gm, example_inputs, inner_compile)` is the
entry point (docs/CONTRACTS.md section 3).

Modules, in the order data flows through them:
    inference          the inference path (entry point aot_module)
    aliases            conversions eager answers with the tensor itself, made explicit
    inplace_forms      in-place calls rewritten as copy_ of the functional op
    functionalize      no mutation inside the traced graph
    decompose          aten -> the primitive op set
    overlapping_inputs inputs sharing memory with a written input: synthetic-base variants
    training           the training path: joint graph -> partition -> compiled halves
    joint              the joint forward+backward graph
    partition          min-cut split into forward and backward
    autograd_function  compiled forward and backward wired into autograd
    output_layouts     fake values re-propagated when input layouts change (channels_last)
    sizes              symbolic sizes read without guarding them; ops faked guard-free
"""

from tracetorch.compiler.aot.decompose import decomposition_table
from tracetorch.compiler.aot.inference import aot_module

__all__ = ["aot_module", "decomposition_table"]
