"""The snapshot fixtures show the run's fixture folder as /fixtures on every machine, however a
tool shortened its path (the CI failure of a guards snapshot: torch installed under /check)."""

import os
import subprocess
import sys
from pathlib import Path

from tui_trace_fixtures import _replace_root


def _shorten_as_torch_does(path: str, torch_dir: str) -> str:
    """What torch.utils._traceback.shorten_filename (which guard comments use) gives for `path`
    when torch is installed in `torch_dir` (passed as its `base`)."""
    code = ("import sys; from torch.utils._traceback import shorten_filename as s; "
            "print(s(sys.argv[1], base=sys.argv[2]))")
    out = subprocess.run([sys.executable, "-c", code, path, torch_dir], capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": ""})
    return out.stdout.strip()


def test_fixture_folder_shown_the_same_for_any_torch_install_folder():
    root = Path("/tmp/pytest-of-root/pytest-173/tracetui_fixtures")
    prog = str(root / "torch" / "prog.py")
    shown = set()
    for torch_dir in ("/tmp/venv/lib/python3.11/site-packages",
                      "/check/work/main/.venv/lib/python3.11/site-packages",
                      "/opt/torch/lib/python3.12/site-packages"):
        text = f"check_tensor(L['x'])  # y = torch.sin(x) + 1  # {_shorten_as_torch_does(prog, torch_dir)}:5 in f"
        shown.add(_replace_root(text, root))
    assert shown == {"check_tensor(L['x'])  # y = torch.sin(x) + 1  # fixtures/torch/prog.py:5 in f"}


def test_absolute_fixture_paths_stay_absolute():
    root = Path("/tmp/pytest-of-root/pytest-9/tracetui_fixtures")
    text = f'{{"filename": "{root}/torch/prog.py", "co_filename": "{root}/ours/prog.py"}}'
    assert _replace_root(text, root) == ('{"filename": "/fixtures/torch/prog.py", '
                                         '"co_filename": "/fixtures/ours/prog.py"}')
