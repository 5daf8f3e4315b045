"""How the API's authenticators appear in the OpenAPI document (drf-spectacular extensions,
registered on import: registry.apis.base imports this module)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "registry.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "pvr_...",
            "description": "An API token: 'Authorization: Bearer pvr_...' (see POST /api/v1/tokens/)",
        }


class BasicPasswordScheme(OpenApiAuthenticationExtension):
    target_class = "registry.authentication.BasicPasswordAuthentication"
    name = "basicAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "http", "scheme": "basic", "description": "username and password, to create a first token"}
