from django.apps import AppConfig


class TrustConfig(AppConfig):
    name = "registry.trust"
    label = "trust"
    verbose_name = "Signed index (TUF)"
    default_auto_field = "django.db.models.BigAutoField"
