from django.apps import AppConfig


class ProvenanceConfig(AppConfig):
    name = "registry.provenance"
    label = "provenance"
    verbose_name = "Build provenance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from registry import oci
        from registry.provenance.referrers import ProvenanceReferrers

        # GET /v2/extensions/NAME/referrers/DIGEST lists each version's provenance (SPEC 7).
        oci.register_referrer_source(ProvenanceReferrers())
