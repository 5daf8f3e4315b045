"""What the API and the catalog show of a version's configuration interface: the schemas its build
read from its KCL files (`Version.interface`, written once by the build sandbox,
`extensions.interface`), with the environment variables and system packages its manifest
declares. Nothing here reads author files: the stored document is only reshaped."""

from __future__ import annotations

from typing import Any

from registry.models import Version

#: The catalog page shows the attributes of this many schemas at most, and this many attributes in
#: all; the rest is in the API's document (the page says so).
MAX_SCHEMAS_SHOWN = 100
MAX_FIELDS_SHOWN = 1000


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def version_interface(version: Version) -> dict[str, Any]:
    """The interface of ``version`` as the API answers it (`registry.apis.interface`). ``available``
    is False for a version published before interfaces were read (its schemas are unknown, not
    absent); the environment and system packages come from its manifest either way."""
    stored: dict[str, Any] | None = version.interface if isinstance(version.interface, dict) else None
    manifest: dict[str, Any] = version.manifest if isinstance(version.manifest, dict) else {}
    return {
        "name": version.extension.name,
        "version": version.version,
        "available": stored is not None,
        "parser": (stored or {}).get("parser"),
        "files": _strings((stored or {}).get("files")),
        "truncated": bool((stored or {}).get("truncated")),
        "warnings": _strings((stored or {}).get("warnings")),
        "schemas": list((stored or {}).get("schemas") or []),
        "environment": {
            "required": _strings(manifest.get("required_env")),
            "optional": _strings(manifest.get("optional_env")),
        },
        "system_packages": _strings(manifest.get("system_packages")),
    }


def interface_section(version: Version) -> dict[str, Any]:
    """The version page's Interface section (``templates/catalog/_interface.html``): the API's
    document, each schema with an anchor (``interface-N``) and its parent's and mixins' anchors
    when they are schemas of the same package, cut to what a page can show."""
    data = version_interface(version)
    anchors: dict[str, str] = {}
    for number, schema in enumerate(data["schemas"]):
        anchors.setdefault(str(schema.get("name")), f"interface-{number}")
    shown: list[dict[str, Any]] = []
    fields = 0
    for number, schema in enumerate(data["schemas"][:MAX_SCHEMAS_SHOWN]):
        all_fields = list(schema.get("fields") or [])
        if shown and fields + len(all_fields) > MAX_FIELDS_SHOWN:
            break
        own = all_fields[: MAX_FIELDS_SHOWN - fields]  # only the first schema shown can be cut
        fields += len(own)
        shown.append(
            {
                **schema,
                "fields": own,
                "fields_more": len(all_fields) - len(own),
                "anchor": f"interface-{number}",
                "parent_anchor": anchors.get(str(schema.get("parent"))),
                "mixin_links": [(m, anchors.get(m)) for m in _strings(schema.get("mixins"))],
                "required_count": sum(1 for f in all_fields if isinstance(f, dict) and f.get("required")),
            }
        )
    data["shown"] = shown
    data["more"] = len(data["schemas"]) - len(shown)
    return data
