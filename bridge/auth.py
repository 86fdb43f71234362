"""The bearer token of a request, read one way for the API and ``/metrics``."""

from __future__ import annotations

from collections.abc import Sequence

from messages.errors import KitsuneError

__all__ = ["bearer_token"]


def bearer_token(headers: Sequence[str]) -> str | None:
    """The token of the request's ``Authorization`` values: ``Bearer <token>``, given once.

    None when there is no header or it is not a bearer token; ``duplicate_header`` (400) when
    the header is given more than once, whatever the values.
    """
    if len(headers) > 1:
        raise KitsuneError("duplicate_header", "Send the Authorization header once",
                           state={"header": "authorization"})
    scheme, _, token = (headers[0] if headers else "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None
