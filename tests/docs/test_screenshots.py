"""The docs' screenshots are there, as ``scripts/screenshots`` makes them: PNGs of a 1280x800 viewport, small."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ("live-view.png", "console.png")
MAX_BYTES = 200_000
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("name", SCREENSHOTS)
def test_each_screenshot_is_a_small_1280x800_png(name: str) -> None:
    data = (ROOT / "docs" / "img" / name).read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    assert struct.unpack(">II", data[16:24]) == (1280, 800)
    assert len(data) <= MAX_BYTES


def test_the_script_that_makes_them_is_executable_and_names_them() -> None:
    script = ROOT / "scripts" / "screenshots"
    assert os.access(script, os.X_OK)
    assert all(f'"{name}"' in script.read_text() for name in SCREENSHOTS)
