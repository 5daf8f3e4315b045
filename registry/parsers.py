"""Request parsers, in a module of their own: DRF imports its default parser classes while
`rest_framework.views` is still loading, so this must not import views."""

from __future__ import annotations

import codecs
import io
import re
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from registry.storedtext import holds_lone_surrogate

MAX_JSON_BODY = 1024 * 1024
# JSON between systems is UTF-8 (RFC 8259 8.1); a byte order mark is tolerated.
JSON_CHARSETS = frozenset({"utf-8", "utf-8-sig"})
# A surrogate can only come from a \uD800-\uDFFF escape: UTF-8 (which decoding checks, and the
# only charset taken) has none.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class SafeJSONParser(JSONParser):
    """DRF's JSON parser, but bounded: a body over 1 MiB, or a document nested too deeply for the
    decoder (``[[[[...]]]]``), is a 400 like any other malformed body, never a 500; so are a
    charset other than UTF-8 and a lone surrogate, refused here once for every field of every view."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        charset = str((parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET)
        try:
            utf8 = codecs.lookup(charset).name in JSON_CHARSETS
        except LookupError:
            utf8 = False
        if not utf8:
            raise ParseError(f"JSON parse error - the body's charset is {charset[:40]!r}; allowed: utf-8 (RFC 8259)")
        data = stream.read(MAX_JSON_BODY + 1) if stream is not None else b""
        if len(data) > MAX_JSON_BODY:
            raise ParseError(f"JSON parse error - the body is larger than {MAX_JSON_BODY // 1024} KiB")
        try:
            document = super().parse(io.BytesIO(data), media_type, parser_context)
            if _SURROGATE_ESCAPE.search(data) and holds_lone_surrogate(document):
                raise ParseError(
                    "JSON parse error - the document holds a lone surrogate (a \\ud800-\\udfff escape without "
                    "its pair): strings must be Unicode text"
                )
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply") from None
        return document
