from django.apps import AppConfig


class BuildsConfig(AppConfig):
    name = "builds"
    verbose_name = "Builds"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core.signals import request_started

        from builds import housekeeping, tasks  # noqa: F401 - registers the Celery tasks by name

        request_started.connect(housekeeping.start_once, dispatch_uid="builds.housekeeping")
