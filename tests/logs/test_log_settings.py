"""TRACE_LOGS parsing: every syntax form and every error message."""
import logging

import pytest

from tracetorch import logs
from tracetorch.logs import registry
from tracetorch.logs.settings import LogSettingsError, LogsHelp, from_kwargs, parse


def test_empty_means_defaults():
    s = parse("  ")
    assert s.components == {} and s.artifacts == set() and s.modules == {}
    assert s.module_level("compiler.frontend.guards") == logging.WARNING
    assert s.enabled_artifacts() == set()


@pytest.mark.parametrize("text, level", [("frontend", logging.INFO), ("+frontend", logging.DEBUG),
                                         ("-frontend", logging.ERROR)])
def test_prefix_sets_level(text, level):
    assert parse(text).components == {"frontend": level}


def test_aliases_map_to_components():
    s = parse("+dynamo,-inductor")
    assert s.components == {"frontend": logging.DEBUG, "backend": logging.ERROR}


def test_whitespace_after_commas_and_several_entries():
    s = parse("+aot,  guards, output_code")
    assert s.components == {"aot": logging.DEBUG}
    assert s.artifacts == {"guards", "output_code"}


def test_artifacts_ignore_the_prefix():
    assert parse("+guards").artifacts == {"guards"}
    assert parse("-guards").artifacts == {"guards"}
    assert parse("-guards").components == {}


def test_all_sets_every_component():
    assert parse("all").components == {c: logging.INFO for c in registry.COMPONENTS}
    assert parse("+all").components == {c: logging.DEBUG for c in registry.COMPONENTS}


def test_debug_component_shows_its_default_artifacts_but_not_off_by_default_ones():
    on = parse("+backend").enabled_artifacts()
    assert "perf_hints" in on and "autotuning" in on
    assert "output_code" not in on and "ir_pre_fusion" not in on and "fusion" not in on
    assert "guards" not in on                       # belongs to frontend
    assert parse("backend").enabled_artifacts() == set()   # INFO does not show artifacts


def test_off_by_default_artifact_when_named():
    assert "output_code" in parse("-backend,output_code").enabled_artifacts()


def test_dotted_module_enables_a_package_or_module():
    s = parse("+compiler.backend")
    assert s.modules == {"compiler.backend": logging.DEBUG}
    assert s.module_level("compiler.backend.scheduler") == logging.DEBUG
    assert s.module_level("compiler.backend") == logging.DEBUG
    assert s.module_level("compiler.backendx") == logging.WARNING
    assert s.module_level("compiler.frontend.guards") == logging.WARNING
    s = parse("+logs.core")                          # a single module file
    assert s.module_level("logs.core") == logging.DEBUG


def test_component_of_modules():
    assert registry.component_for_module("compiler.frontend.guards") == "frontend"
    assert registry.component_for_module("compiler.aot.partition") == "aot"
    assert registry.component_for_module("compiler.backend.scheduler") == "backend"
    assert registry.component_for_module("compiler.backend.cache") == "cache"
    assert registry.component_for_module("compiler.backend.cache.disk") == "cache"
    assert registry.component_for_module("compiler.frontend.dynamic") == "dynamic"
    assert registry.component_for_module("debug.minifier") == "minifier"
    assert registry.component_for_module("something.else") == "frontend"


def test_foreign_module_name_is_a_stdlib_logger():
    s = parse("+json.decoder")
    assert s.foreign == {"json.decoder": logging.DEBUG}


def test_help_lists_visible_names_with_descriptions():
    with pytest.raises(LogsHelp) as e:
        parse("help")
    text = str(e.value)
    for comp in registry.COMPONENTS.values():
        assert comp.name in text and comp.description in text
    assert "dynamo" in text and "inductor" in text
    assert "output_code" in text and "off by default" in text
    assert "trace_bytecode" not in text              # hidden artifact
    with pytest.raises(LogsHelp) as e:
        parse("+help")
    assert "trace_bytecode" in str(e.value)


def test_unknown_name_error_names_entry_suggests_and_points_at_help():
    with pytest.raises(LogSettingsError) as e:
        parse("+dynamo,grpah")
    msg = str(e.value)
    assert "'grpah'" in msg and "Did you mean 'graph'?" in msg and "TRACE_LOGS=help" in msg
    assert "Valid names:" in msg and "recompiles" in msg


def test_unknown_prefixed_name_keeps_prefix_in_message():
    with pytest.raises(LogSettingsError, match=r"'\+inducter'.*Did you mean 'inductor'"):
        parse("+inducter")


def test_unknown_dotted_module_suggests_a_module():
    with pytest.raises(LogSettingsError) as e:
        parse("+compiler.bakend")
    assert "'+compiler.bakend'" in str(e.value) and "Did you mean 'compiler.backend'" in str(e.value)


def test_trace_only_record_is_explained():
    with pytest.raises(LogSettingsError, match="'graph_break' is a structured-trace record.*"
                                                "'graph_breaks'"):
        parse("graph_break")


@pytest.mark.parametrize("text", ["++dynamo", "dynamo;guards", "dynamo,,guards", "+", "dyn amo"])
def test_syntax_errors(text):
    with pytest.raises(LogSettingsError, match="cannot parse entry"):
        parse(text)


def test_bad_environment_is_a_clean_message_and_exit(run_python):
    r = run_python("import tracetorch.logs", env={"TRACE_LOGS": "+dynamo,gaurds"})
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert "unknown log name 'gaurds'" in r.stderr and "Did you mean 'guards'?" in r.stderr


def test_help_from_environment_prints_and_exits_zero(run_python):
    r = run_python("import tracetorch.logs; print('not reached')", env={"TRACE_LOGS": "help"})
    assert r.returncode == 0 and "not reached" not in r.stdout
    assert "Components:" in r.stderr and "Traceback" not in r.stderr


def test_bad_format_from_environment(run_python):
    r = run_python("import tracetorch.logs", env={"TRACE_LOGS_FORMAT": "fancy"})
    assert r.returncode == 2 and "TRACE_LOGS_FORMAT='fancy'" in r.stderr
    assert "glog, json, console" in r.stderr and "Traceback" not in r.stderr


# -- set_logs -------------------------------------------------------------------------------------
def test_set_logs_kwargs():
    s = from_kwargs(dict(dynamo=logging.DEBUG, aot=logging.INFO, guards=True, output_code=False,
                         modules={"compiler.backend.scheduler": logging.DEBUG}))
    assert s.components == {"frontend": logging.DEBUG, "aot": logging.INFO}
    assert s.artifacts == {"guards"}
    assert s.modules == {"compiler.backend.scheduler": logging.DEBUG}


def test_set_logs_unknown_name_and_bad_artifact_value():
    with pytest.raises(LogSettingsError, match="Unrecognized log or artifact name passed to "
                                                "set_logs: gaurds. Did you mean 'guards'"):
        from_kwargs({"gaurds": True})
    with pytest.raises(LogSettingsError, match="artifact 'guards' takes True or False"):
        from_kwargs({"guards": 10})


def test_set_logs_applies_and_resets(fresh_logs):
    logs.set_logs(inductor=logging.DEBUG, output_code=True)
    assert logs.enabled("output_code") and logs.enabled("perf_hints")
    assert not logs.enabled("guards")
    logs.set_logs()
    assert not logs.enabled("output_code")


def test_set_logs_is_ignored_with_a_warning_when_trace_logs_is_set(fresh_logs):
    logs.configure_from_env({"TRACE_LOGS": "guards"})
    with pytest.warns(UserWarning, match="Using TRACE_LOGS environment variable"):
        logs.set_logs(output_code=True)
    assert logs.enabled("guards") and not logs.enabled("output_code")
