"""The framing of the schema checker's requests and answers (:mod:`~driver.site_tools.schema_check`), apart
from the checker: the node writes them without loading jsonschema, which took 6% of its start."""

from __future__ import annotations

import struct

__all__ = ["FRAME"]

FRAME = struct.Struct(">I")
"""The length of each request and answer, before its JSON."""
