"""Results as MCP carries them: errors, tool descriptions, and call results (structured and as text)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types
import orjson

__all__ = ["error", "to_call_tool_result"]


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
    lines.append(orjson.dumps(structured, option=orjson.OPT_INDENT_2, default=str).decode())
    content.append(types.TextContent(text="\n".join(lines)))
    return types.CallToolResult(content=content, structured_content=structured, is_error="error" in structured)
