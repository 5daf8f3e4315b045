"""The build pipeline: Build model, services, Celery tasks, and the publish/build endpoints."""
