"""Graph breaks: side effects, data-dependent control flow, numpy, generators, try/except,
opaque objects, breaks in nested inlined calls, in loops, and several breaks per function."""
import collections
import logging

import numpy as np
import torch

from tests.compiler.frontend.corpus import L, P, STD, STD2, T

_log = logging.getLogger("tracetorch.corpus")
_LOG = []


class Opaque:
    """A C-implemented-like object: its method is opaque to capture (an unsupported builtin)."""

    def __init__(self):
        self.d = collections.OrderedDict(a=1)


OPAQUE = Opaque()


def print_between(x):
    y = x * 2
    print("corpus: print_between")
    return y + 1
def print_start(x):
    print("corpus: print_start")
    return x.sin()
def print_end(x):
    y = x.cos()
    print("corpus: print_end")
    return y
def item_in_if(x):
    if x.sum().item() > 0:
        return x + 1
    return x - 1
def item_as_scalar(x):
    s = x.max().item()
    return x / (abs(s) + 1)
def tolist_loop(x):
    total = x[0] * 0
    for v in x[:, 0].tolist():
        total = total + v
    return total
def bool_tensor_if(x):
    if (x > 0).any():
        return x * 2
    return x
def tensor_in_while(x):
    i = 0
    while x.sum() > -100 and i < 3:
        x = x - 1
        i += 1
    return x
def numpy_call(x):
    y = x.sin()
    z = torch.from_numpy(np.cos(y.numpy()))
    return z + 1
def numpy_scalar(x):
    return x * float(np.float32(2.0))
def generator_fn(x):
    def gen():
        yield x * 2
        yield x * 3
    return sum(gen())
def try_except(x):
    y = x * 2
    try:
        z = y + 1
    except RuntimeError:
        z = y - 1
    return z
def try_finally(x):
    y = x + 1
    try:
        y = y * 2
    finally:
        _LOG.append(1)
    return y
def opaque_method(x):
    y = x * 2
    n = len(OPAQUE.d.copy())
    return y + n
def logging_call(x):
    y = x + 1
    _log.debug("corpus: logging_call")
    return y * 2
def list_side_effect(x):
    y = x * 2
    _LOG.append(float(y.sum()))
    return y
def break_in_inlined(x):
    return _inner_break(x) + 1
def _inner_break(x):
    y = x * 3
    print("corpus: inner")
    return y - 1
def break_in_deeply_inlined(x):
    return _middle(x) * 2
def _middle(x):
    return _inner_break(x + 1) + 1
def break_in_loop(x):
    for i in range(3):
        x = x + i
        print("corpus: loop", i)
    return x
def break_in_while_loop(x):
    i = 0
    while i < 2:
        x = x * 2
        print("corpus: while", i)
        i += 1
    return x
def two_breaks(x):
    a = x + 1
    print("corpus: one")
    b = a * 2
    print("corpus: two")
    return b - 1
def three_breaks_mixed(x):
    a = x.relu()
    print("corpus: a")
    if a.sum().item() > 0:
        a = a + 1
    b = a.cos()
    n = len(OPAQUE.d.copy())
    return b * n
def break_then_return_container(x):
    y = x * 2
    print("corpus: c")
    return {"y": y, "z": [y + 1]}
def break_with_live_locals(x, y):
    a = x + y
    b = x - y
    print("corpus: live")
    return a * b
def break_in_module(x):
    return PrintingModule()(x)
class PrintingModule(torch.nn.Module):
    def forward(self, x):
        y = x.exp()
        print("corpus: module")
        return y.log()
def break_mutating_list(x):
    out = [x]
    out.append(x * 2)
    print("corpus: list")
    out.append(out[-1] * 2)
    return torch.stack(out)
def break_global_write(x):
    global _COUNTER
    _COUNTER = _COUNTER + 1
    print("corpus: global")
    return x * _COUNTER
_COUNTER = 0


def _reset_counter(fn, i):
    global _COUNTER
    _COUNTER = 0


def item_then_tensor_op(x):
    n = int(x.abs().sum().item()) % 3 + 1
    return x * n
def break_inside_no_grad(x):
    with torch.no_grad():
        y = x * 2
        print("corpus: no_grad")
        z = y + 1
    return z + x
def nonzero_data_dependent(x):
    idx = torch.nonzero(x > 0)
    return idx.float().sum() + x.sum()
def unsupported_builtin_id(x):
    y = x + 1
    key = id(y) > 0
    return y * 2 if key else y
def tensor_repr_fstring(x):
    y = x + 1
    s = f"{y.sum()}"
    return y * len(s) * 0 + y
def input_to_print_in_comprehension(x):
    ys = [x * i for i in range(3)]
    print("corpus: comp", len(ys))
    return sum(ys)



# Calls that break inside the callee where the caller cannot resume (in a loop, in a try
# block): the caller runs eagerly and, as under Dynamo's frame hook, the callee compiles alone.
def _callee_with_break(x):
    y = x * 2
    print("corpus: callee")
    return y + 1
class _BreakingBlock(torch.nn.Module):
    def forward(self, x):
        y = x.sin()
        print("corpus: block")
        return y.cos()
class _Helper:
    def run(self, x):
        y = x + 1
        print("corpus: helper method")
        return y * 2
_BLOCK = _BreakingBlock()
_HELPER = _Helper()
def callee_breaks_in_loop(x):
    for _ in range(2):
        x = _callee_with_break(x)
    return x + 1
def module_breaks_in_loop(x):
    for _ in range(2):
        x = _BLOCK(x)
    return x * 2
def method_breaks_in_loop(x):
    for _ in range(2):
        x = _HELPER.run(x)
    return x - 1
def callee_breaks_in_try(x):
    try:
        y = _callee_with_break(x)
    except RuntimeError:
        y = x
    return y * 3


PROGRAMS = [
    P(print_between),
    P(print_start),
    P(print_end),
    P(item_in_if),
    P(item_as_scalar),
    P(tolist_loop),
    P(bool_tensor_if),
    P(tensor_in_while),
    P(numpy_call),
    P(numpy_scalar),
    P(generator_fn),
    P(try_except),
    P(callee_breaks_in_loop),
    P(module_breaks_in_loop),
    P(method_breaks_in_loop),
    P(callee_breaks_in_try),
    P(try_finally, recompiles=1,
      note="same graphs and breaks as Dynamo (1, 0); Dynamo guards the length of the global list "
           "_LOG the finally block appends to, so each call recompiles (3); we only append to it "
           "(no guard): 1 recompile, for the new dim-0 size"),
    P(opaque_method),
    P(logging_call, graphs=1, breaks=0, recompiles=1,
      note="fewer than Dynamo (2, 1, 2): a logger method called with constant arguments is "
           "deferred and called for real after the graph (SideEffects.record_call, as Dynamo's "
           "reorderable_logging_functions option does), so no break; 1 recompile, for the new "
           "dim-0 size (issue 17: logger.warning_once in transformers' loss_function property)"),
    P(list_side_effect, recompiles=1,
      note="graphs and breaks as Dynamo (1, 1); recompiles 1 (the new size of x) where Dynamo has 3: "
           "to rebuild the stack at the float() break Dynamo realizes the global list _LOG and guards its "
           "length and first item (len(G['_LOG']) == 1), which the eager call before each compiled call "
           "changes; we pass _LOG.append across the break as the list's method and only append to it, "
           "so the list's length is never guarded"),
    P(break_in_inlined),
    P(break_in_deeply_inlined),
    P(break_in_loop),
    P(break_in_while_loop),
    P(two_breaks),
    P(three_breaks_mixed),
    P(break_then_return_container),
    P(break_with_live_locals, STD2),
    P(break_in_module, graphs=2,
      note="breaks and recompiles as Dynamo (1 site, 3 recompiles): PrintingModule() is built as a "
           "new module (new_modules.py) and its forward inlined; the print() break in it compiles the "
           "forward on its own (exp, then log after the print). Dynamo compiles one more graph (3) for "
           "the same two pieces of tensor work; the caller has no tensor work of its own"),
    P(break_mutating_list),
    P(break_global_write, before_call=_reset_counter),
    P(item_then_tensor_op),
    P(break_inside_no_grad, [(T(3, 4, requires_grad=True),)] * 3),
    P(nonzero_data_dependent),
    P(unsupported_builtin_id, graphs=2, breaks=1, recompiles=3,
      note="Dynamo gives up on the whole frame (0 graphs, 0 recompiles): its id() of a graph tensor is a "
           "compile-time fake id that cannot cross a graph break. We run id(y) eagerly at the break; the "
           "real int crosses it and, after one change, is a dynamic scalar (SymInt) of the resume "
           "function: 2 graphs and the recompiles of any one-break program on this schedule (as "
           "item_as_scalar, which matches Dynamo's 3)"),
    P(tensor_repr_fstring, graphs=2, recompiles=3,
      note="1 break site as Dynamo (the f-string of a tensor), but Dynamo then gives up on the whole frame "
           "(0 graphs, 0 recompiles); we compile both sides (2 graphs). The str crosses the break on the "
           "stack; when its value changes the resume function recompiles once with it unspecialized "
           "(dynamic.py: a str computed at a break; len(s) a symbolic input), so values no longer "
           "recompile: 3 recompiles = that one + the new dim-0 size of the frame and of its resume"),
    P(input_to_print_in_comprehension),
]
