"""The debug folder's event filing, driven by events emitted here (no compiler involved)."""
from tracetorch import logs
from tracetorch.debug.debug_dir import DebugFolder


def test_events_are_filed_per_compile_id(tmp_path):
    folder = DebugFolder(str(tmp_path))
    try:
        with logs.compile_context(0, 0):
            logs.artifact("bytecode", lambda: "ORIGINAL", which="original")
            logs.artifact("bytecode", lambda: "TRANSFORMED", which="transformed")
            logs.artifact("graph_break", lambda: {"reason": "print()", "filename": "p.py", "lineno": 3})
            logs.artifact("aot_graphs", lambda: "def forward(self, x): ...", graph="inference")
            logs.artifact("compile_metrics", lambda: {"co_name": "f", "co_filename": "p.py",
                                                      "co_firstlineno": 1, "fail_type": None})
        # recompile reasons arrive before the new compile id exists: filed under the next one
        logs.artifact("recompiles", lambda: "Recompiling function f in p.py:1\n    - 0/0: size mismatch")
        with logs.compile_context(0, 1):
            logs.artifact("compile_metrics", lambda: {"co_name": "f", "co_filename": "p.py", "co_firstlineno": 1,
                                                      "fail_type": "CppCompileError", "recompile_reason": "x"})
    finally:
        folder.close()
    assert (tmp_path / "0_0" / "original_bytecode.txt").read_text().strip() == "ORIGINAL"
    assert (tmp_path / "0_0" / "transformed_bytecode.txt").read_text().strip() == "TRANSFORMED"
    assert "print()" in (tmp_path / "0_0" / "graph_breaks.txt").read_text()   # json twin, no text one
    assert (tmp_path / "0_0" / "aot_forward.py").read_text().startswith("# inference graph")
    assert "size mismatch" in (tmp_path / "0_1" / "recompile_reasons.txt").read_text()
    assert not (tmp_path / "0_0" / "recompile_reasons.txt").exists()
    assert not (tmp_path / "0_0" / "output_code.py").exists()   # that stage never ran
    index = (tmp_path / "index.txt").read_text()
    assert "[0/0] f (p.py:1)  status: graph break" in index
    assert "[0/1] f (p.py:1)  status: recompile, failed" in index
    assert "compile_debug" in (tmp_path / "config.yaml").read_text()
    assert "[__bytecode]" in (tmp_path / "debug.log").read_text()
    assert '"frame_compile_id": 1' in (tmp_path / "trace.log").read_text()
