"""GET /api/v1/extensions/{name}/versions/{version}/interface: a version's configuration interface
(its KCL schemas as its build read them, with the environment variables and system packages of its
manifest). A sub-resource, as provenance is: the document can be large, and the version document
stays small. Its shape is defined once, here, and both renders and documents it."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from registry import selectors
from registry.apis.base import ApiView, ok
from registry.apis.shapes import NAME_PARAM, VERSION_PARAM, answers, envelope, render
from registry.interface import version_interface


class InterfaceField(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField(allow_null=True, help_text='as written, e.g. [str], {str:str}, "gp3" | "gp2"')
    optional = serializers.BooleanField(help_text="declared with ? (name?: type)")
    # `required` is also an attribute of Field; DRF's metaclass takes declared fields out of the class.
    required = serializers.BooleanField(  # type: ignore[assignment]
        help_text="a user must set it: not optional and without a default"
    )
    default = serializers.CharField(allow_null=True, help_text="the default as written; null: none")
    doc = serializers.CharField(
        allow_blank=True, help_text="from the schema docstring's Attributes section, else a trailing # comment"
    )
    decorators = serializers.ListField(child=serializers.CharField(), help_text='e.g. deprecated(version="1.2")')
    line = serializers.IntegerField(help_text="in its file")


class InterfaceCheck(serializers.Serializer):
    rule = serializers.CharField(help_text="the check: expression, as written")
    message = serializers.CharField(allow_null=True, help_text="the message when it fails")
    condition = serializers.CharField(allow_null=True, help_text="the rule applies only if this holds")
    line = serializers.IntegerField()


class InterfaceSchema(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=["schema", "mixin", "protocol"])
    file = serializers.CharField(help_text="the .k file, relative to the package")
    line = serializers.IntegerField()
    doc = serializers.CharField(allow_blank=True, help_text="its docstring, without the Attributes section")
    # `parent` and `fields` are also attributes of a serializer; DRF's metaclass takes declared
    # fields out of the class, so they render as declared.
    parent = serializers.CharField(  # type: ignore[assignment]
        allow_null=True, help_text="the schema it extends, as written (base.Config)"
    )
    mixins = serializers.ListField(child=serializers.CharField())
    protocol = serializers.CharField(allow_null=True, help_text="for a mixin: the protocol it is for")
    index_signature = serializers.CharField(allow_null=True, help_text="e.g. [key: str]: str")
    fields = InterfaceField(many=True, help_text="its attributes, in source order")  # type: ignore[assignment]
    checks = InterfaceCheck(many=True, help_text="its check: rules, in source order")


class InterfaceEnvironment(serializers.Serializer):
    required = serializers.ListField(  # type: ignore[assignment]
        child=serializers.CharField(), help_text="[configuration] required_env"
    )
    optional = serializers.ListField(child=serializers.CharField(), help_text="[configuration] optional_env")


class VersionInterface(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.CharField()
    available = serializers.BooleanField(
        help_text="false: published before the registry read interfaces (its schemas are unknown, not absent)"
    )
    parser = serializers.CharField(allow_null=True, help_text="what read the schemas, e.g. kcl-lib 0.13.2")
    files = serializers.ListField(child=serializers.CharField(), help_text="the .k files read")
    truncated = serializers.BooleanField(help_text="something was left out: warnings say what")
    warnings = serializers.ListField(child=serializers.CharField())
    schemas = InterfaceSchema(many=True, help_text="by file, then in source order")
    environment = InterfaceEnvironment()
    system_packages = serializers.ListField(child=serializers.CharField(), help_text="[dependencies] system_packages")


class VersionInterfaceApi(ApiView):
    """GET /api/v1/extensions/{name}/versions/{version}/interface."""

    @extend_schema(
        operation_id="version_interface",
        summary="One version's configuration interface: KCL schemas, environment, system packages",
        description=(
            "Every schema of the version's .k files (but tests/ and examples/): its attributes with type, "
            "optional or not, default and docstring, and its check: rules, as the build read them with "
            "KCL's parser (in the build sandbox, within the REGISTRY_INTERFACE_* limits: past one, "
            "truncated is true and warnings say what was left out); plus the environment variables and "
            "system packages of its extension.toml. Build metadata in the URL is ignored."
        ),
        parameters=[NAME_PARAM, VERSION_PARAM],
        responses=answers({200: envelope("VersionInterfaceEnvelope", VersionInterface())}, 400, 404),
        tags=["catalog"],
    )
    def get(self, request: Request, name: str, version: str) -> Response:
        return ok(render(VersionInterface, version_interface(selectors.version_get(name=name, version=version))))
