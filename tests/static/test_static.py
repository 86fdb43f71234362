"""Static checks run as tests: ruff, and the layers and the pure core's imports (import-linter); strict mypy is
test_types.py's."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
IMPORT_LINTER = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def _run(*command: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with the contracts of ``cwd``'s pyproject.toml, on the packages in ``cwd``."""
    return _run(str(BIN / "lint-imports"), "--no-logo", "--no-cache", cwd=cwd)


def test_ruff_finds_nothing() -> None:
    result = _run(str(BIN / "ruff"), "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_imports_keep_the_layers_and_the_pure_core() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


@pytest.fixture(scope="module")
def clean_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The root packages and pyproject.toml (the contracts) copied into a folder of their own, which passes as the
    project does (checked once: every test's copy is this one until it adds its import)."""
    folder = tmp_path_factory.mktemp("packages")
    for package in IMPORT_LINTER["root_packages"]:
        shutil.copytree(ROOT / package, folder / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", folder)
    result = _lint_imports(folder)
    assert result.returncode == 0, result.stdout + result.stderr
    return folder


@pytest.fixture
def packages_copy(clean_copy: Path, tmp_path: Path) -> Path:
    """A test's own copy of the clean copy, to add an import to."""
    shutil.copytree(clean_copy, tmp_path, dirs_exist_ok=True)
    return tmp_path


INJECTED = {
    "an upward import inside a function of messages/":
        ("messages/steplog.py", "def _upward() -> None:\n    from bridge import node  # noqa: F401\n",
         "Layers import downwards only", "messages.steplog -> bridge.node"),
    "an upward import at the top of actors/":
        ("actors/bus.py", "import mcp_gateway.server  # noqa: F401\n",
         "Layers import downwards only", "actors.bus -> mcp_gateway.server"),
    "the standard library's asyncio inside a function of core/":
        ("core/claims.py", "def _sleepy() -> None:\n    import asyncio  # noqa: F401\n",
         "The pure core imports no IO library", "core.claims -> asyncio"),
    "a service of bridge/ importing the node":
        ("bridge/fleet/member.py", "def _composed() -> None:\n    from bridge import node  # noqa: F401\n",
         "bridge/ in floors: routes > node > services > inputs", "bridge.fleet.member -> bridge.node"),
    "the composition root importing a route":
        ("bridge/node.py", "import bridge.routes.tabs  # noqa: F401\n",
         "bridge/ in floors: routes > node > services > inputs", "bridge.node -> bridge.routes.tabs"),
    "pykka in messages/":
        ("messages/events.py", "import pykka  # noqa: F401\n",
         "The pure core imports no IO library", "messages.events -> pykka"),
}


@pytest.mark.parametrize(("module", "code", "contract", "chain"), INJECTED.values(), ids=list(INJECTED))
def test_lint_imports_fails_on(packages_copy: Path, module: str, code: str, contract: str, chain: str) -> None:
    """The checker itself: the copy passes as the project does until one import is added to it."""
    path = packages_copy / module
    path.write_text(path.read_text() + "\n\n" + code)
    result = _lint_imports(packages_copy)
    assert result.returncode == 1, result.stdout
    assert f"{contract} BROKEN" in result.stdout and chain in result.stdout, result.stdout
