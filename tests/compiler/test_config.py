"""compiler.config: every source (defaults, YAML, env, patch, assignment, load_dict) and error."""
import os
import subprocess
import sys

import pytest
import yaml

from tracetorch.compiler import config
from tracetorch.compiler.config import ConfigError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def clean_config():
    """No YAML, no TRACE_* env, no assignments and no outer patches; restored afterwards.

    Outer patches matter: the session-scoped backend cache fixture (tests/conftest.py) patches
    backend.cache_dir for as long as the worker lives, so these tests would see it whenever an
    earlier test on the same xdist worker used that fixture.
    """
    outer_patches = list(config._patch_stack)
    config._patch_stack.clear()
    config.reload({})
    config.reset_assignments()
    try:
        yield config
    finally:
        config._patch_stack[:] = outer_patches
        config.reset_assignments()
        config.reload()


def run_module(*args, env=None):
    full = {k: v for k, v in os.environ.items() if not k.startswith("TRACE_")}
    full["PYTHONPATH"] = ROOT
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "tracetorch.compiler.config", *args], env=full, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


# -- defaults and typed access ----------------------------------------------------------------
def test_defaults_and_sections(clean_config):
    assert config.frontend.cache_size_limit == 8
    assert config.aot.partitioner == "min_cut"
    assert config.backend.cache_dir == ""
    assert config.triton.num_warps_choices == [2, 4, 8]
    assert config.cpp.extra_flags == ["-O3", "-march=native"]
    assert config.debug.debug_dir == "./trace_debug"
    assert config.repro.after is None and config.repro.level == 2
    assert config.testing.inject_relu_bug is None
    assert list(config.to_dict()) == ["frontend", "aot", "backend", "triton", "cpp", "debug",
                                      "repro", "testing"]
    assert config.sources() == {}
    for section in config.SECTIONS.values():
        for opt in section.values():
            assert opt.doc and "\n" not in opt.doc


def test_to_dict_is_a_copy(clean_config):
    d = config.to_dict()
    d["triton"]["num_warps_choices"].append(16)
    assert config.triton.num_warps_choices == [2, 4, 8]


def test_unknown_section_and_option_attribute(clean_config):
    with pytest.raises(AttributeError, match="no section or attribute 'frontnd'.*Did you mean "
                                             "'frontend'"):
        config.frontnd
    with pytest.raises(AttributeError, match=r"unknown option 'frontend.cache_limit'.*Did you "
                                             r"mean 'cache_size_limit'.*Valid options of \[frontend\]"):
        config.frontend.cache_limit


# -- patch ---------------------------------------------------------------------------------------
def test_patch_context_manager_all_key_forms(clean_config):
    with config.patch(**{"frontend.cache_size_limit": 2}):
        assert config.frontend.cache_size_limit == 2
        assert config.sources() == {"frontend.cache_size_limit": "patch"}
        with config.patch(frontend_cache_size_limit=3, backend_fusion=False):
            assert config.frontend.cache_size_limit == 3 and config.backend.fusion is False
        assert config.frontend.cache_size_limit == 2 and config.backend.fusion is True
    with config.patch({"triton": {"num_warps_choices": [4]}}):
        assert config.triton.num_warps_choices == [4]
    assert config.frontend.cache_size_limit == 8 and config.triton.num_warps_choices == [2, 4, 8]


def test_patch_decorator_and_restores_on_exception(clean_config):
    @config.patch(**{"testing.inject_relu_bug": "accuracy"})
    def inside():
        return config.testing.inject_relu_bug

    assert inside() == "accuracy" and config.testing.inject_relu_bug is None
    with pytest.raises(RuntimeError):
        with config.patch(repro_level=4):
            raise RuntimeError
    assert config.repro.level == 2


def test_options_dict_as_compile_would_pass_it(clean_config):
    options = {"backend.max_fusion_size": 8, "cpp.openmp": False}
    with config.patch(**options):
        assert config.backend.max_fusion_size == 8 and config.cpp.openmp is False


def test_patch_errors_are_immediate_and_clear(clean_config):
    with pytest.raises(ConfigError, match=r"config.patch: unknown option 'frontend.cache_size'.*"
                                          r"Did you mean 'cache_size_limit'"):
        config.patch(**{"frontend.cache_size": 1})
    with pytest.raises(ConfigError, match=r"unknown option 'frontnd.verbose'.*Did you mean "
                                          r"'frontend.verbose'"):
        config.patch(**{"frontnd.verbose": True})
    with pytest.raises(ConfigError, match=r"frontend.cache_size_limit = '2' \(str\) is not valid; "
                                          r"accepted: an int"):
        config.patch(frontend_cache_size_limit="2")
    with pytest.raises(ConfigError, match=r"accepted: 'compile_error' or 'runtime_error' or "
                                          r"'accuracy' or None"):
        config.patch(testing_inject_relu_bug="wrong")
    with pytest.raises(ConfigError, match="accepted: a bool"):
        config.patch(backend_fusion=1)
    with pytest.raises(ConfigError, match="accepted: a list of ints"):
        config.patch(triton_num_warps_choices=[2, "4"])
    with pytest.raises(ConfigError, match="accepted: 1 or 2 or 3 or 4"):
        config.patch(repro_level=7)


def test_float_option_accepts_int(clean_config):
    with config.patch(repro_tolerance=1):
        assert config.repro.tolerance == 1.0 and isinstance(config.repro.tolerance, float)


# -- assignment and load_dict ------------------------------------------------------------------
def test_assignment_and_load_dict(clean_config):
    config.frontend.verbose = True
    assert config.frontend.verbose is True and config.sources()["frontend.verbose"] == "assignment"
    with pytest.raises(ConfigError, match="accepted: a bool"):
        config.frontend.verbose = "yes"
    with pytest.raises(ConfigError, match="unknown option 'frontend.verbos'"):
        config.frontend.verbos = True
    saved = config.to_dict()
    with config.patch(backend_fusion=False):
        saved_patched = config.to_dict()
    config.reset_assignments()
    config.load_dict(saved_patched)
    assert config.backend.fusion is False and config.frontend.verbose is True
    assert config.sources()["backend.fusion"] == "load_dict"
    config.load_dict(saved)
    assert config.to_dict() == saved
    with pytest.raises(ConfigError, match="config.load_dict: unknown option 'aot.nope'"):
        config.load_dict({"aot": {"nope": 1}})


# -- environment ---------------------------------------------------------------------------------
def test_env_vars_are_converted_to_the_option_type(clean_config, tmp_path):
    dbg = str(tmp_path / "dbg")     # compile_debug is switched on below: never the working dir
    config.reload({"TRACE_FRONTEND_CACHE_SIZE_LIMIT": "3", "TRACE_BACKEND_FUSION": "off",
                   "TRACE_REPRO_TOLERANCE": "0.5", "TRACE_TRITON_NUM_WARPS_CHOICES": "[1, 2]",
                   "TRACE_CPP_EXTRA_FLAGS": "-O2,-g", "TRACE_REPRO_AFTER": "backend",
                   "TRACE_TESTING_INJECT_RELU_BUG": "accuracy", "TRACE_COMPILE_DEBUG": "1",
                   "TRACE_COMPILE_DEBUG_DIR": dbg, "TRACE_REPRO_LEVEL": "4",
                   "TRACE_LOGS": "+dynamo", "TRACE_DIR": "/tmp/x"})   # not config: ignored
    assert config.frontend.cache_size_limit == 3 and config.backend.fusion is False
    assert config.repro.tolerance == 0.5 and config.triton.num_warps_choices == [1, 2]
    assert config.cpp.extra_flags == ["-O2", "-g"] and config.repro.after == "backend"
    assert config.testing.inject_relu_bug == "accuracy" and config.debug.compile_debug is True
    assert config.debug.debug_dir == dbg and config.repro.level == 4
    assert config.sources()["frontend.cache_size_limit"] == "env TRACE_FRONTEND_CACHE_SIZE_LIMIT"
    assert config.sources()["debug.compile_debug"] == "env TRACE_COMPILE_DEBUG"
    config.reload({"TRACE_REPRO_AFTER": "", "TRACE_DEBUG_COMPILE_DEBUG": "true",
                   "TRACE_COMPILE_DEBUG_DIR": dbg})
    assert config.repro.after is None and config.debug.compile_debug is True


@pytest.mark.parametrize("var, value, message", [
    ("TRACE_FRONTEND_CACHE_SIZE_LIMT", "3", r"environment variable TRACE_FRONTEND_CACHE_SIZE_LIMT: "
     r"unknown option 'frontend.cache_size_limt'. Did you mean 'cache_size_limit'"),
    ("TRACE_FRONTEND_CACHE_SIZE_LIMIT", "three", r"TRACE_FRONTEND_CACHE_SIZE_LIMIT='three': "
     r"frontend.cache_size_limit expects an int"),
    ("TRACE_BACKEND_FUSION", "maybe", r"TRACE_BACKEND_FUSION='maybe': backend.fusion expects a bool "
     r"\(1/0, true/false, yes/no, on/off\)"),
    ("TRACE_REPRO_AFTER", "dynamo", r"expects 'frontend' or 'backend' or None"),
    ("TRACE_TRITON_NUM_WARPS_CHOICES", "2,x", r"expects a list of ints with each item >= 1 \(comma-separated\)"),
])
def test_env_errors(clean_config, var, value, message):
    with pytest.raises(ConfigError, match=message):
        config.reload({var: value})


def test_bad_env_at_import_is_a_clean_message_and_exit(clean_config, monkeypatch, capsys):
    monkeypatch.setenv("TRACE_CPP_THREADS", "many")
    with pytest.raises(SystemExit) as e:
        config._init()                       # what importing compiler.config runs
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == "tracetorch: TRACE_CPP_THREADS='many': cpp.threads expects an int >= 0.\n"


# -- YAML ------------------------------------------------------------------------------------------
def test_yaml_file_and_precedence(clean_config, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("frontend:\n  cache_size_limit: 4\n  verbose: true\nbackend:\n  fusion: false\n")
    config.reload({"TRACE_CONFIG": str(path), "TRACE_FRONTEND_CACHE_SIZE_LIMIT": "5"})
    assert config.frontend.verbose is True and config.backend.fusion is False
    assert config.frontend.cache_size_limit == 5                      # env beats YAML
    assert config.sources()["frontend.verbose"] == f"yaml {path}:3"
    with config.patch(frontend_cache_size_limit=6):                    # patch beats env
        assert config.frontend.cache_size_limit == 6
    assert config.frontend.cache_size_limit == 5


@pytest.mark.parametrize("text, message", [
    ("frontend:\n  cache_size_limit: [1\n", r"invalid YAML at .*c.yaml:3:1"),
    ("frontend:\n  cache_size_limit: 4\n bad indent: 1\n", r"invalid YAML at .*c.yaml:3:2"),
    ("- 1\n- 2\n", r"must be a mapping of sections"),
    ("frontnd:\n  verbose: true\n", r"unknown config section 'frontnd'. Did you mean 'frontend'"),
    ("frontend: 3\n", r"section 'frontend' must be a mapping of options"),
    ("aot:\n  decompose: true\n  partitionr: min_cut\n",
     r"c.yaml:3\): unknown option 'aot.partitionr'. Did you mean 'partitioner'"),
    ("aot:\n  partitioner: greedy\n", r"c.yaml:2\): aot.partitioner = 'greedy' \(str\) is not "
                                      r"valid; accepted: 'min_cut' or 'default'"),
])
def test_yaml_errors_name_file_and_line(clean_config, tmp_path, text, message):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        config.reload({"TRACE_CONFIG": str(path)})


def test_unreadable_yaml(clean_config, tmp_path):
    with pytest.raises(ConfigError, match=r"TRACE_CONFIG=.*missing.yaml: cannot read the config "
                                          r"file: No such file or directory"):
        config.reload({"TRACE_CONFIG": str(tmp_path / "missing.yaml")})


def test_empty_yaml_is_fine(clean_config, tmp_path):
    (tmp_path / "c.yaml").write_text("# nothing\n")
    config.reload({"TRACE_CONFIG": str(tmp_path / "c.yaml")})
    assert config.sources() == {}


# -- serialisation and the CLI ---------------------------------------------------------------------
def test_to_yaml_round_trips_through_trace_config(clean_config, tmp_path):
    with config.patch(triton_num_warps_choices=[4, 8], repro_after="frontend", cpp_cxx="clang++"):
        text = config.to_yaml()
        expected = config.to_dict()
    assert "num_warps_choices: [4, 8]  # from patch" in text
    assert yaml.safe_load(text) == expected
    (tmp_path / "c.yaml").write_text(text)
    config.reload({"TRACE_CONFIG": str(tmp_path / "c.yaml")})
    assert config.to_dict() == expected


def test_cli_prints_effective_config_and_sources(clean_config, tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("aot:\n  decompose: false\n")
    config.reload({"TRACE_CONFIG": str(tmp_path / "c.yaml"), "TRACE_REPRO_LEVEL": "3"})
    assert config.main([]) == 0
    out = capsys.readouterr().out
    assert "[frontend]" in out and "cache_size_limit = 8" in out
    assert f"decompose = False   <- yaml {tmp_path / 'c.yaml'}:2" in out
    assert "level = 3   <- env TRACE_REPRO_LEVEL" in out
    assert "non-default values: aot.decompose (yaml" in out


def test_python_dash_m_compiler_config_yaml():
    r = run_module("--yaml", env={"TRACE_REPRO_LEVEL": "3"})
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(r.stdout)["repro"]["level"] == 3
    assert "level: 3  # from env TRACE_REPRO_LEVEL" in r.stdout


@pytest.mark.parametrize("key, value", [("frontend.cache_size_limit", -1),
                                        ("triton.num_warps_choices", [4, 0]),
                                        ("repro.timeout", 0),
                                        ("repro.tolerance", -1e-3)])
def test_out_of_range_value_is_a_clear_error(clean_config, key, value):
    with pytest.raises(config.ConfigError) as e:
        with config.patch(**{key: value}):
            pass
    assert key in str(e.value) and repr(value) in str(e.value) and ">=" in str(e.value)


def test_out_of_range_environment_value_names_the_variable():
    r = run_module(env={"TRACE_FRONTEND_CACHE_SIZE_LIMIT": "-3"})
    assert r.returncode != 0
    assert "TRACE_FRONTEND_CACHE_SIZE_LIMIT" in r.stderr and ">= 0" in r.stderr
    assert "Traceback" not in r.stderr


def test_reading_while_another_thread_patches():
    """config.patch recomputes the effective options; a thread reading an option meanwhile (the
    Triton compile pool's callbacks read config.triton) must always find it (the recompute used
    to clear the table first: "unknown option 'compile_timeout'" on the H200)."""
    import threading

    from tracetorch.compiler import config as cfg
    errors, stop = [], threading.Event()

    def read():
        while not stop.is_set():
            try:
                cfg.triton.compile_timeout
            except AttributeError as e:      # noqa: PERF203
                errors.append(e)
    t = threading.Thread(target=read)
    t.start()
    try:
        for _ in range(3000):
            with cfg.patch(**{"backend.conv_layout": "auto"}):
                pass
    finally:
        stop.set()
        t.join()
    assert errors == []
