"""Request parsers, in a module of their own: DRF imports its default parser classes while
`rest_framework.views` is still loading, so this must not import views."""

from __future__ import annotations

import io
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_JSON_BODY = 1024 * 1024


class SafeJSONParser(JSONParser):
    """DRF's JSON parser, but bounded: a body over 1 MiB, or a document nested too deeply for the
    decoder (``[[[[...]]]]``), is a 400 like any other malformed body, never a 500."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = stream.read(MAX_JSON_BODY + 1) if stream is not None else b""
        if len(data) > MAX_JSON_BODY:
            raise ParseError(f"JSON parse error - the body is larger than {MAX_JSON_BODY // 1024} KiB")
        try:
            return super().parse(io.BytesIO(data), media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply") from None
