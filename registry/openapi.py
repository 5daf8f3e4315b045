"""How the API appears in the OpenAPI document: its authenticators (drf-spectacular extensions,
registered on import: registry.apis.base imports this module), the schema class, and the index
document's operation, which a postprocessing hook adds (its view is a plain Django one)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema

from extensions.index import ENTRY_KEYS, REQUIRED_ENTRY_KEYS


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


INDEX_PATH = "/api/v1/index/{name}"
_INDEX_ENTRY = {
    "type": "object",
    "properties": {
        "version": {"type": "string"},
        "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "size": {"type": "integer"},
        "yanked": {"type": "boolean"},
        "type": {"type": "string"},
        "dependencies": {"type": "object", "additionalProperties": {"type": "string"}},
        "compatibility": {"type": "object", "additionalProperties": {"type": "string"}},
        "provides": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        "published_at": {"type": "string", "format": "date-time"},
    },
    "required": list(REQUIRED_ENTRY_KEYS),
}
assert set(_INDEX_ENTRY["properties"]) == set(ENTRY_KEYS), "the index entry's schema lost a key of its format"


def add_index_document(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: ``GET /api/v1/index/{name}``, a plain Django view
    (registry.apis.resolve.index_document, answered before Django by registry.fastpath), which the
    generator does not see. Anyone may read it: no token is asked for, none is throttled."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["IndexDocumentEnvelope"] = {
        "type": "object",
        "properties": {
            "success": {"type": "boolean", "enum": [True]},
            "data": {
                "type": "object",
                "properties": {
                    "format": {"type": "integer"},
                    "name": {"type": "string"},
                    "versions": {"type": "array", "items": _INDEX_ENTRY},
                },
                "required": ["format", "name", "versions"],
            },
        },
        "required": ["success", "data"],
    }
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}
    etag = {"ETag": {"schema": {"type": "string"}, "description": "the SHA-256 of the document, quoted"}}
    result.setdefault("paths", {})[INDEX_PATH] = {
        "get": {
            "operationId": "index_document",
            "summary": "An extension's index document",
            "description": "Every version with sha256, size, yanked, dependencies, compatibility and "
            "provides (canonical bytes: identical data, identical bytes). Also served as a static "
            "file (index/NAME) and as a signed TUF target.",
            "tags": ["index"],
            "parameters": [
                {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                {"name": "If-None-Match", "in": "header", "required": False, "schema": {"type": "string"}},
            ],
            "responses": {
                "200": {
                    "description": "the document",
                    "headers": etag,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/IndexDocumentEnvelope"}}},
                },
                "304": {"description": "not modified (If-None-Match matched the ETag)", "headers": etag},
                "404": {"description": "no extension of that name", "content": error},
            },
        }
    }
    return result
