"""Results as MCP carries them: errors, tool descriptions, and call results (structured and as text), built as
the JSON the SDK writes (no SDK needed: ``kitsune mcp``'s front answers calls before it loads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["call_result", "error", "page_texts"]


def error(code: str, message: str, **state: Any) -> dict[str, Any]:
    """A gateway's own error result (not retryable), with ``state`` when given."""
    body: dict[str, Any] = {"error": message, "code": code, "retryable": False}
    if state:
        body["state"] = state
    return body


def _headline(result: Mapping[str, Any]) -> str:
    if "error" in result:
        return f"{result.get('code')}: {result['error']}"
    if isinstance(result.get("summary"), str):
        return str(result["summary"])
    status = result.get("status", "ok")
    return "ok" if status == "ok" else f"ok ({status})"


_SAID_BY_THE_TEXT = ("snapshot", "diff", "elements", "document")
"""A snapshot's fields its text says (``document``: the tag every ref carries), left out of the JSON line."""


def _unsaid(holder: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in holder.items() if k not in _SAID_BY_THE_TEXT and not (k == "truncated" and v is False)}


def page_texts(result: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A snapshot's or a diff's text as lines of its own (not a JSON string), and the result without what the
    text says (nor ``truncated: false``: no cut line says it)."""
    texts: list[str] = []
    snapshot = any(isinstance(result.get(key), str) for key in ("diff", "snapshot"))
    shown = _unsaid(result) if snapshot else dict(result)
    for holder in (result, result.get("page")):
        if not isinstance(holder, dict):
            continue
        for key in ("diff", "snapshot"):
            if isinstance(holder.get(key), str):
                texts.append(f"{'changes' if key == 'diff' else 'snapshot'}:\n{holder[key]}")
        if holder is not result:
            page = _unsaid(holder)
            if page:
                shown["page"] = page
            else:
                shown.pop("page", None)
    return shown, texts


def call_result(result: dict[str, Any]) -> dict[str, Any]:
    """A result as MCP carries it, a ``CallToolResult`` as JSON in the SDK's wire form (the order of its
    per-version models' fields, nothing None; a test holds the two equal): structured, readable as text, a
    screenshot as an image. A snapshot's structured content has every field but ``elements``, as a write's
    ``page`` has: the text says each ref with its role and name, and that list of a dict per ref was most of the
    cost of the answer's way to the client (the SDK walks it four times, the client's twice: a 1,000-row table's
    answer took 5-10 ms more with it than without)."""
    content: list[dict[str, Any]] = []
    structured = dict(result)
    image = structured.pop("image", None)
    if isinstance(image, str):
        content.append({"data": image, "mimeType": str(structured.get("mimeType", "image/png")), "type": "image"})
        structured["bytes"] = len(image) * 3 // 4
    if isinstance(structured.get("snapshot"), str):  # the text's lines say each ref with its role and name
        structured.pop("elements", None)
    lines = [_headline(structured)]
    if isinstance(structured.get("hint"), str):
        lines.append(str(structured["hint"]))
    shown, texts = page_texts(structured)
    lines.append(orjson.dumps(shown, default=str).decode())
    lines.extend(texts)
    content.append({"text": "\n".join(lines), "type": "text"})
    return {"content": content, "isError": "error" in structured, "structuredContent": structured}
