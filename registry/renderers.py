"""The API's JSON renderer, in a module of its own for the reason registry.parsers gives."""

from __future__ import annotations

import logging
from typing import Any

from rest_framework.renderers import JSONRenderer

log = logging.getLogger(__name__)


class _AsciiJSONRenderer(JSONRenderer):
    ensure_ascii = True


class SafeJSONRenderer(JSONRenderer):
    """DRF's JSON renderer (UTF-8), except for an answer holding a lone surrogate (which UTF-8
    cannot encode: an echo of some input no check refused first), which is written with JSON's
    escapes (``\\ud800``) instead of failing as a 500."""

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            log.warning("an answer holds a lone surrogate: some input reached it unchecked; sent escaped")
            return _AsciiJSONRenderer().render(data, accepted_media_type, renderer_context)
