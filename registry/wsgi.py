"""WSGI entry point for gunicorn: `gunicorn registry.wsgi`."""

import os

from django.core.wsgi import get_wsgi_application

from registry.fastpath import IndexFastPath

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
# Index documents are answered before Django's request machinery (registry/fastpath.py).
application = IndexFastPath(get_wsgi_application())
