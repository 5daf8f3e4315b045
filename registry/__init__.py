"""The Django project (settings, urls, Celery app) and the catalog app."""

from registry.celery import app as celery_app

__all__ = ["celery_app"]
