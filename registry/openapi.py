"""How the API appears in the OpenAPI document: its authenticators (drf-spectacular extensions,
registered on import: registry.apis.base imports this module) and the schema class."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema


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


class RegistrySchema(AutoSchema):
    """The API's operations as they really are (REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]):

    - security: an operation that needs a token lists the schemes it takes (and no anonymous
      alternative), so Swagger shows a lock on it; a read anyone may do lists none (a token sent
      there is still checked: a bad one is a 401, documented on every operation);
    - request bodies: required wherever one is documented; and those of DELETE (the owner and
      token removals also take a JSON body, which drf-spectacular documents for PUT, PATCH and
      POST only)."""

    def get_auth(self) -> list[dict[str, Any]]:
        if self.method not in getattr(self.view, "token_methods", ()):
            return []
        return [scheme for scheme in super().get_auth() if scheme]

    def _get_request_body(self, direction: str = "request") -> dict[str, Any] | None:
        if self.method != "DELETE" or self.get_request_serializer() is None:
            body = super()._get_request_body(direction)
        else:
            self.method = "POST"  # the base class reads it for "may this method have a body" only
            try:
                body = super()._get_request_body(direction)
            finally:
                self.method = "DELETE"
        if body:
            body["required"] = True  # every operation that takes a body needs one
        return body
