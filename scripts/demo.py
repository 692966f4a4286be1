"""The demo program of `tracetui --demo` (tracetorch.debug.demo: a small GPT-style model with a
graph break and a recompile), runnable from a checkout:

    TRACE_COMPILE_DEBUG=1 python scripts/demo.py     # then: tracetui (opens the newest run)
"""
from tracetorch.debug.demo import main

if __name__ == "__main__":
    raise SystemExit(main())
