"""Entry point `tracetorch.plugins: debug = "tracetorch.debug.plugin:install"` (run by compiler.hooks).

Registers the repro wrapper (TRACE_REPRO_AFTER), the debug-folder wrapper and explain listener,
and opens the TRACE_COMPILE_DEBUG folder when the configuration asks for it. The wrappers read
the configuration on every compile, so `config.patch` works after installation; the folder's
event sink is opened here (or by `debug.debug_dir.start()`), because events flow before any
compiler wrapper runs.
"""

from __future__ import annotations

from tracetorch import logs

log = logs.get_logger(__name__)


def install() -> None:
    from tracetorch.compiler import config, hooks
    from tracetorch.debug import debug_dir, repro_wrapper

    # Order matters: the last registered wrapper is outermost. The debug folder records the
    # graph first; the repro wrapper then sees failures as the user's compile call does.
    hooks.register_compiler_wrapper("debug_folder", debug_dir.wrap)
    hooks.register_compiler_wrapper("repro", repro_wrapper.wrap)
    hooks.register_explain_listener("debug_folder", debug_dir.on_explain)
    if config.debug.compile_debug:
        debug_dir.start()
    log.debug("debug_plugin_installed", compile_debug=config.debug.compile_debug,
              repro_after=config.repro.after, repro_level=config.repro.level)
