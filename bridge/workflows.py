"""The workflow files of a node's directory (``workflows:`` in the configuration; the format: ``core.workflows``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from core.workflows import NAME, SUFFIXES, Workflow, parse_workflow
from messages.errors import KitsuneError

__all__ = ["WorkflowLibrary"]


class WorkflowLibrary:
    """The workflow files of one directory, named by file name without suffix."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory

    def _path(self, name: str) -> Path | None:
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise KitsuneError("invalid_parameter", "workflow names are letters, digits, '_', '-' and '.'",
                               state={"param": "workflow"})
        return next((p for p in (self._directory / (name + s) for s in SUFFIXES) if p.is_file()), None)

    def load(self, name: str) -> Workflow:
        """Read and parse a workflow; ``workflow_not_found`` when there is no such file."""
        path = self._path(name)
        if path is None:
            raise KitsuneError("workflow_not_found", f"No workflow named {name!r}", state={"workflow": name})
        return parse_workflow(name, path.read_bytes())

    def sha256(self, name: str) -> str | None:
        """The file's current SHA-256, or None when it is gone."""
        path = self._path(name)
        return hashlib.sha256(path.read_bytes()).hexdigest() if path is not None else None

    def names(self) -> list[str]:
        """Every workflow in the directory."""
        if not self._directory.is_dir():
            return []
        return sorted(p.stem for p in self._directory.iterdir() if p.suffix in SUFFIXES and NAME.fullmatch(p.stem))
