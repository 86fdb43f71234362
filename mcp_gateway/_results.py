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
    return f"ok ({result.get('status', 'ok')})"


def page_texts(result: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A snapshot's or a diff's text as lines of its own (not a JSON string), and the result without it (nor
    its elements, which the text lists)."""
    texts: list[str] = []
    shown = {k: v for k, v in result.items() if k not in ("snapshot", "diff", "elements")}
    for holder, out in ((result, shown), (result.get("page"), None)):
        if not isinstance(holder, dict):
            continue
        for key in ("diff", "snapshot"):
            if isinstance(holder.get(key), str):
                texts.append(f"{'changes' if key == 'diff' else 'snapshot'}:\n{holder[key]}")
        if out is None:
            shown["page"] = {k: v for k, v in holder.items() if k not in ("snapshot", "diff")}
    return shown, texts


def to_call_tool_result(result: dict[str, Any]) -> types.CallToolResult:
    """A result as MCP carries it: structured, readable as text, a screenshot as an image."""
    content: list[types.ContentBlock] = []
    structured = dict(result)
    image = structured.pop("image", None)
    if isinstance(image, str):
        content.append(types.ImageContent(data=image, mime_type=str(structured.get("mimeType", "image/png"))))
        structured["bytes"] = len(image) * 3 // 4
    lines = [_headline(structured)]
    if isinstance(structured.get("hint"), str):
        lines.append(str(structured["hint"]))
    shown, texts = page_texts(structured)
    lines.append(orjson.dumps(shown, option=orjson.OPT_INDENT_2, default=str).decode())
    lines.extend(texts)
    content.append(types.TextContent(text="\n".join(lines)))
    return types.CallToolResult(content=content, structured_content=structured, is_error="error" in structured)
