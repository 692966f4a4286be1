"""Plugins: a plugin that fails to load is reported, and is an error when the user switched on
a feature that only it provides (TRACE_COMPILE_DEBUG=1 without the debug plugin must not run
on silently without a debug folder)."""
import pytest
import torch

from tracetorch import compiler
from tracetorch.compiler import config, hooks
from tracetorch.compiler.errors import PluginLoadError


@pytest.fixture
def broken_debug_plugin(monkeypatch):
    def load():
        raise ImportError("cannot import name 'install' (simulated broken install)")

    monkeypatch.setattr(hooks, "_FALLBACK_PLUGINS", {})
    monkeypatch.setattr(hooks, "_entry_points",
                        lambda: [type("EP", (), {"name": "debug", "value": "x:install",
                                                 "load": staticmethod(load)})()])
    hooks._reset_for_tests()
    yield
    hooks._reset_for_tests()
    monkeypatch.undo()
    hooks.load_plugins()


def test_broken_plugin_is_an_error_when_its_feature_was_asked_for(broken_debug_plugin, tmp_path):
    with config.patch(**{"debug.compile_debug": True, "debug.debug_dir": str(tmp_path)}):
        with pytest.raises(PluginLoadError, match="TRACE_COMPILE_DEBUG=1 needs the tracetorch plugin 'debug'"):
            hooks.load_plugins()


def test_broken_plugin_without_its_feature_only_warns(broken_debug_plugin):
    hooks.load_plugins()                      # no exception: nothing asked for the plugin
    fn = compiler.compile(lambda x: x * 2, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(fn(x), x * 2)
