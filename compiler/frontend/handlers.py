"""Every module that registers handlers into dispatch's tables, imported once (by capture.py)
so the tables are full before the first frame is traced. A new handler module is added here."""
from tracetorch.compiler.frontend import (  # noqa: F401 (imported for their registrations)
    attributes,
    builder,
    builtin_calls,
    builtins_containers,
    builtins_numbers,
    builtins_objects,
    calls,
    codegen,
    inline,
    methods,
    model_outputs,
    new_modules,
    numpy_calls,
    private_objects,
    stdlib_calls,
    torch_calls,
)
