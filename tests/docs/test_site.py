"""The documentation site builds in strict mode (a broken link or anchor, or a page missing from the
navigation, fails the run), and its reference, generated at build time, holds every action with its
parameters and every error code with its HTTP status. Every file of the repository the docs and the
README name is there."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from docs.hooks.reference import pages
from messages.commands import ACTIONS, parameters
from messages.errors import ERROR_CODES

ROOT = Path(__file__).resolve().parents[2]


class _Cells(HTMLParser):
    """The text of each table row's cells, and each element id in order of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.ids: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids += [value for name, value in attrs if name == "id" and value]
        if tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _parsed(page: Path) -> _Cells:
    parser = _Cells()
    parser.feed(page.read_text())
    return parser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The site as ``mkdocs build --strict`` makes it from this tree."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, env=env, check=False)
    assert built.returncode == 0, built.stderr
    yield out


def test_the_site_builds_in_strict_mode_with_every_generated_page(site: Path) -> None:
    for path in pages():
        built = site / (path.removesuffix(".md") + "/index.html" if path.endswith(".md") else path)
        assert built.is_file(), path


def test_every_error_code_is_in_the_reference_with_its_status(site: Path) -> None:
    rows = {row[0]: row[1:] for row in _parsed(site / "reference/errors/index.html").rows if len(row) == 3}
    assert rows == {code.name: [str(code.http_status), "yes" if code.retryable else "no"]
                    for code in ERROR_CODES.values()}


def test_every_action_and_its_parameters_are_in_the_reference(site: Path) -> None:
    page = _parsed(site / "reference/commands/index.html")
    named = {row[0] for row in page.rows if row}
    assert set(ACTIONS) <= set(page.ids)
    assert {param.json_name for cls in ACTIONS.values() for param in parameters(cls)} <= named


def test_every_repository_path_the_docs_and_the_readme_name_is_there() -> None:
    folders = {path.name for path in ROOT.iterdir() if path.is_dir() and not path.name.startswith(".")}
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    named = {(text.relative_to(ROOT), path) for text in texts
             for path in re.findall(r"`([\w.-]+/[\w./-]*)`", text.read_text()) if path.split("/")[0] in folders}
    assert {(text, path) for text, path in named if not (ROOT / path).exists()} == set()
