"""tracetorch: a legible PyTorch compiler built around its own observability.

The installed import names live under this one namespace so they never collide with a user's
own `logs/`, `debug.py` or `compiler/` next to their script:

    from tracetorch import compiler
    opt = compiler.compile(model)          # or torch.compile(model, backend=compiler.backend)

    tracetorch.compiler   capture (frontend), AOT autograd (aot), loop IR and codegen (backend)
    tracetorch.logs       TRACE_LOGS, the structured trace and its reader
    tracetorch.debug      TRACE_COMPILE_DEBUG folders, repro scripts, the minifier
    tracetorch.tui        the `tracetui` terminal browser

In the repository the four packages are the top-level folders beside this one; pyproject.toml
maps them under `tracetorch` (setuptools package-dir) for regular and editable installs alike.
"""
import os as _os

_SUBPACKAGES = ("compiler", "logs", "debug", "tui")


def _source_tree_root():
    """The repository root when this file is imported from a checkout (the subpackages are its
    sibling folders rather than children of this one), else None."""
    here = _os.path.dirname(_os.path.abspath(__file__))
    if _os.path.isdir(_os.path.join(here, "compiler")):
        return None                                    # installed: tracetorch/compiler/...
    root = _os.path.dirname(here)
    marker = _os.path.join(root, "compiler", "api.py")
    return root if _os.path.isfile(marker) and _os.path.isfile(_os.path.join(root, "pyproject.toml")) else None


# From a checkout (a test run from the repository root imports this folder before any installed
# copy), let `tracetorch.compiler` resolve to the sibling folder, as the install mapping does.
if (_root := _source_tree_root()) is not None and _root not in __path__:
    __path__.append(_root)
del _root


def __getattr__(name):
    """`import tracetorch; tracetorch.compiler.compile(...)`: subpackages import on first use."""
    if name in _SUBPACKAGES:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'tracetorch' has no attribute {name!r}; its packages are "
                         f"{', '.join(_SUBPACKAGES)}")
