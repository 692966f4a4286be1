"""Install the top-level folders compiler/, logs/, debug/ and tui/ as tracetorch.compiler,
tracetorch.logs, ... (setuptools package-dir mapping: the repository keeps its layout, the
installed names cannot collide with a user's own `logs/` or `debug.py`). Metadata is in
pyproject.toml."""
from setuptools import find_packages, setup

SUBPACKAGES = ("compiler", "logs", "debug", "tui")

packages = ["tracetorch"] + [f"tracetorch.{p}"
                             for p in find_packages(include=[f"{s}*" for s in SUBPACKAGES])]
package_dir = {"tracetorch": "tracetorch", **{f"tracetorch.{s}": s for s in SUBPACKAGES}}

setup(packages=packages, package_dir=package_dir,
      package_data={"tracetorch.debug": ["README.md"], "tracetorch.compiler": ["native_checks.cpp"]})
