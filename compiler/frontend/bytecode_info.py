"""Facts about a code object's bytecode that the evaluator and the code generator share:
its instructions (as `dis` reads them, for 3.11 and 3.12), jump targets, loops, and the
exception-table regions (try / with / 3.12 inlined-comprehension cleanup)."""
from __future__ import annotations

import dis
import functools
import linecache
import sys

PY312 = sys.version_info >= (3, 12)

JUMP_BACKWARD_OPS = {"JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "POP_JUMP_BACKWARD_IF_TRUE",
                     "POP_JUMP_BACKWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_NONE",
                     "POP_JUMP_BACKWARD_IF_NOT_NONE"}


class CodeInfo:
    def __init__(self, code):
        self.code = code
        self.instructions = [i for i in dis.get_instructions(code)
                             if i.opname not in ("CACHE", "EXTENDED_ARG")]
        self.index_of = {inst.offset: k for k, inst in enumerate(self.instructions)}
        # a jump to an EXTENDED_ARG prefix (a loop head with a big FOR_ITER target) lands
        # on the instruction it extends
        pending = []
        for inst in dis.get_instructions(code):
            if inst.opname == "EXTENDED_ARG":
                pending.append(inst.offset)
            elif inst.offset in self.index_of:
                for off in pending:
                    self.index_of[off] = self.index_of[inst.offset]
                pending = []
        self.regions = []       # (start, end, kind) with kind in try / with / cleanup
        for e in dis.Bytecode(code).exception_entries:
            self.regions.append((e.start, e.end, self._handler_kind(e.target)))
        # (head offset, back-jump offset) of every loop
        self.loops = [(inst.argval, inst.offset) for inst in self.instructions
                      if inst.opname in JUMP_BACKWARD_OPS]

    def _handler_kind(self, target):
        k = self.index_of.get(target)
        if k is None:
            return "try"
        ops = [i.opname for i in self.instructions[k:k + 8]]
        if "WITH_EXCEPT_START" in ops:
            return "with"
        if ops and ops[0] == "PUSH_EXC_INFO":
            return "try"
        return "cleanup"

    def region_kinds(self, offset) -> set:
        return {kind for start, end, kind in self.regions if start <= offset < end}

    def in_loop(self, offset):
        """The outermost loop (head, back-jump) containing offset, or None."""
        found = None
        for head, back in self.loops:
            if head <= offset <= back and (found is None or head < found[0]):
                found = (head, back)
        return found

    def next_offset(self, offset):
        return self.instructions[self.index_of[offset] + 1].offset

    def source_line(self, lineno):
        if lineno is None:
            return ""
        return linecache.getline(self.code.co_filename, lineno).rstrip("\n")


@functools.lru_cache(maxsize=512)
def code_info(code) -> CodeInfo:
    return CodeInfo(code)


def format_instruction(inst) -> str:
    arg = f" {inst.argrepr}" if inst.argrepr else ""
    return f"{inst.opname}{arg}"
