from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"
    verbose_name = "Extension registry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings

        from registry.celery import app

        # The reaper runs as often as builds beat (registry/celery.py).
        app.conf.beat_schedule["reap-stale-builds"]["schedule"] = float(settings.REGISTRY_BUILD_HEARTBEAT_SECONDS)
        # Shared download counts are written as often as web processes write their own.
        app.conf.beat_schedule["flush-downloads"]["schedule"] = float(settings.REGISTRY_DOWNLOADS_FLUSH_SECONDS)
