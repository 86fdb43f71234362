"""Results as MCP carries them: errors, tool descriptions, and call results (structured and as text)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
import orjson

__all__ = ["error", "page_texts", "to_call_tool_result"]


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


def to_call_tool_result(result: dict[str, Any]) -> types.CallToolResult:
    """A result as MCP carries it: structured, readable as text, a screenshot as an image. A snapshot's structured
    content has every field but ``elements``, as a write's ``page`` has: the text says each ref with its role and
    name, and that list of a dict per ref was most of the cost of the answer's way to the client (the SDK walks
    it four times, the client's twice: a 1,000-row table's answer took 5-10 ms more with it than without)."""
    content: list[types.ContentBlock] = []
    structured = dict(result)
    image = structured.pop("image", None)
    if isinstance(image, str):
        content.append(types.ImageContent(data=image, mime_type=str(structured.get("mimeType", "image/png"))))
        structured["bytes"] = len(image) * 3 // 4
    if isinstance(structured.get("snapshot"), str):  # the text's lines say each ref with its role and name
        structured.pop("elements", None)
    lines = [_headline(structured)]
    if isinstance(structured.get("hint"), str):
        lines.append(str(structured["hint"]))
    shown, texts = page_texts(structured)
    lines.append(orjson.dumps(shown, default=str).decode())
    lines.extend(texts)
    content.append(types.TextContent(text="\n".join(lines)))
    return types.CallToolResult(content=content, structured_content=structured, is_error="error" in structured)
