"""The layering of .importlinter holds, and `make lint`'s check fails on an import that breaks it.

The breaking imports are made in a copy of the packages in a temporary folder (never in the work
tree), and lint-imports runs there exactly as `make lint` runs it here (``--no-cache``: no cache
folder is left in the work tree).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from queueops import extras

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).parent / "lint-imports"
PACKAGES = ("queueops", "collectors", "console", "pipeline")


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tree / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / ".importlinter", tree / ".importlinter")
    return tree


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}\n")


def test_the_work_tree_keeps_every_contract() -> None:
    out = _lint(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


@pytest.mark.parametrize(("module", "offending", "contract"), [
    # The core importing the console (the cycle serve -> console -> queueops, the other way round).
    ("queueops/config.py", "import console.health  # noqa", "queueops layers"),
    # The core importing the pipeline (the old queueops.config <-> pipeline.params cycle).
    ("queueops/store/schema.py", "from pipeline import params  # noqa", "queueops layers"),
    # The collectors importing the service (scheduler side) that runs them.
    ("collectors/runner.py", "from queueops.service import plan  # noqa", "queueops layers"),
    # The alerts importing the actions for a constant (one layer, independent parts).
    ("queueops/alerts/rules.py", "from queueops.actions import decide  # noqa", "queueops layers"),
    # The service reaching Streamlit through a helper: a collector-only install would need it.
    ("queueops/store/reader.py", "import streamlit  # noqa", "collector-only install"),
])
def test_lint_fails_on_an_import_that_breaks_the_layering(tmp_path: Path, module: str, offending: str,
                                                           contract: str) -> None:
    tree = _copy(tmp_path)
    assert _lint(tree).returncode == 0  # the copy as it is passes: the failure below is the import's
    _append(tree / module, offending)
    out = _lint(tree)
    assert out.returncode != 0, out.stdout
    broken = out.stdout[out.stdout.index("Broken contracts"):] if "Broken contracts" in out.stdout else out.stdout
    assert contract in broken and "BROKEN" in out.stdout, out.stdout


def test_a_missing_extra_is_said_with_the_pip_command() -> None:
    """Python without its site-packages (-S) really lacks Streamlit and PySpark: the error names
    the extra and the pip command, instead of an ImportError from deep inside."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from queueops import extras\n"
            "print(extras.missing('console'), extras.missing('pipeline'))\n"
            "extras.require('console', 'queueops serve (the console)')")
    out = subprocess.run([sys.executable, "-S", "-c", code, str(ROOT)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stdout.strip() == "['streamlit'] ['pyspark']"
    assert "queueops serve (the console) needs the 'console' extra" in out.stderr
    assert "pip install 'queueops[console]'" in out.stderr
    assert extras.missing("console") == extras.missing("pipeline") == []  # make installs every extra


def test_every_module_sits_in_a_layer() -> None:
    # A module no layer names is checked by no contract: a new core module must be added to
    # .importlinter (its bottom layer lists the core's modules one by one).
    text = (ROOT / ".importlinter").read_text()
    layers = text.split("layers =", 1)[1].split("[importlinter:", 1)[0]
    named = {part.strip() for line in layers.splitlines() for part in line.replace(":", "|").split("|")
             if part.strip()}
    missing = []
    for path in sorted((ROOT / "queueops").rglob("*.py")):
        mod = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if mod in ("queueops", "queueops.__main__"):
            continue
        in_layer = any(mod == n or mod.startswith(n + ".") for n in named)
        split_package = path.name == "__init__.py" and any(n.startswith(mod + ".") for n in named)
        if not in_layer and not split_package:
            missing.append(mod)
    assert not missing, f"modules in no layer of .importlinter: {missing}"
