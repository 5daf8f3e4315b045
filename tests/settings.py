"""Settings for the test suite: `registry.settings` read from a clean, private environment.

Every test process (the xdist controller and each worker) gets its own REGISTRY_DATA_DIR in a
fresh temporary directory (removed when the process exits) and its own random secret key, so no
test ever writes into the repository's var/ and workers never share files.

The database is SQLite by default, and PostgreSQL when pytest runs with ``--postgres``
(tests/services.py starts a private server and exports its URL as TESTS_DATABASE_URL before the
xdist workers are spawned); a DATABASE_URL from the shell is ignored. The SQLite *test* database
is a file inside the private data dir rather than SQLite's in-memory database, so that processes
started by a test (a Celery worker, a server) can open the very same database (see `live_db_url`
in tests/services.py).
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import tempfile

# Variables that would make the suite depend on the shell it runs in (a broker, S3, a cache, a
# public URL, limits...).
_LEAKY = ("CELERY_BROKER_URL", "CACHE_URL", "DJANGO_DEBUG", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS")
for _name in list(os.environ):
    if _name.startswith("REGISTRY_") or _name in _LEAKY:
        del os.environ[_name]

# The database: SQLite unless `pytest --postgres` exported its server (tests/services.py); a
# DATABASE_URL left in the shell must not turn the SQLite run into a run on some other database.
if os.environ.get("TESTS_DATABASE_URL"):
    os.environ["DATABASE_URL"] = os.environ["TESTS_DATABASE_URL"]
else:
    os.environ.pop("DATABASE_URL", None)

_DATA_DIR = tempfile.mkdtemp(prefix="registry-test-")
atexit.register(shutil.rmtree, _DATA_DIR, ignore_errors=True)
os.environ["REGISTRY_DATA_DIR"] = _DATA_DIR
os.environ["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)

from registry.settings import *  # noqa: E402, F403
from registry.settings import DATABASES, REGISTRY_DATA_DIR, STATIC_ROOT  # noqa: E402

# WhiteNoise warns about a missing STATIC_ROOT on every live server start.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)

# Hashing passwords properly is slow by design; tests only need it to be correct.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Tasks run in-process unless a test starts a real worker (`celery_worker_factory`).
CELERY_BROKER_URL = ""
CELERY_TASK_ALWAYS_EAGER = True

# One private in-process cache per test process; tests/services.py clears it before every test so
# throttle counters never leak from one test into the next. The rates are the production ones:
# a test about throttling lowers them with the `settings` fixture.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tests"}}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not ":memory:", so other processes can share the test database. pytest-django adds
    # the xdist suffix (_gw0, ...) itself; the directory is private to this process anyway.
    DATABASES["default"]["TEST"] = {"NAME": str(REGISTRY_DATA_DIR / "test-registry.sqlite3")}

# No housekeeping thread in the test processes (it would reap and sweep under the tests' feet);
# the live registries the tests start (gunicorn, registry.settings) run it as production does.
REGISTRY_HOUSEKEEPING = False
