"""WSGI entry point: `gunicorn registry.wsgi`, or `granian --interface wsgi registry.wsgi:application`
(docs/deploy.md)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
django_application = get_wsgi_application()

from registry.background import starting  # noqa: E402 - needs the apps loaded
from registry.fastpath import BlobFastPath, DownloadFastPath, IndexFastPath  # noqa: E402
from registry.requestbody import with_sized_bodies  # noqa: E402
from registry.serverenv import without_server_environment  # noqa: E402

# Index documents, package downloads and OCI layer pulls are answered before Django's request machinery
# (registry/fastpath.py); a body sent without a length reaches Django with one (registry/requestbody.py);
# every process runs its background work (registry/background.py).
application = without_server_environment(
    starting(DownloadFastPath(IndexFastPath(BlobFastPath(with_sized_bodies(django_application)))))
)
