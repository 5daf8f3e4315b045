"""The one settings module. Every value comes from the environment through the typed helpers in
`registry.env`, with embedded defaults that run on one machine (SQLite, files under
REGISTRY_DATA_DIR, Celery tasks in-process). See docs/configuration.md for every variable."""

from __future__ import annotations

from pathlib import Path

from registry.env import (
    database_from_url,
    env_base_url,
    env_bool,
    env_choice,
    env_data_dir,
    env_int,
    env_issuers,
    env_list,
    env_path,
    env_rate,
    env_seconds,
    env_size,
    env_str,
    env_url,
    env_url_prefix,
    secret_key,
)

BASE_DIR = Path(__file__).resolve().parent.parent
REGISTRY_DATA_DIR = env_data_dir("REGISTRY_DATA_DIR", BASE_DIR / "var")

SECRET_KEY = secret_key("DJANGO_SECRET_KEY", REGISTRY_DATA_DIR)
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Behind a TLS-terminating proxy, set REGISTRY_BEHIND_PROXY=1 so secure cookies and scheme are right.
if env_bool("REGISTRY_BEHIND_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
# The public base URL of the registry, used in download URLs; empty means "from the request".
REGISTRY_PUBLIC_URL = env_base_url("REGISTRY_PUBLIC_URL")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "registry",
    "registry.trust",
    "registry.provenance",
    "builds",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "registry.urls"
# The web catalog's login (accounts, tokens, publishing, owners' controls; registry.account_views).
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "catalog-home"
LOGOUT_REDIRECT_URL = "catalog-home"
WSGI_APPLICATION = "registry.wsgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url("DATABASE_URL", f"sqlite:///{REGISTRY_DATA_DIR / 'registry.sqlite3'}"),
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = REGISTRY_DATA_DIR / "static"

# Uploads: small ones in memory, anything larger streams to a temporary file while it is read.
FILE_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
# Every temporary file of an upload or a build lives here, named by its upload or build id
# (upload-<id>.part, build-<id>-<attempt>/), so that the sweeper can tell what is whose.
REGISTRY_TMP_DIR = REGISTRY_DATA_DIR / "tmp"
REGISTRY_TMP_DIR.mkdir(mode=0o700, exist_ok=True)
FILE_UPLOAD_TEMP_DIR = str(REGISTRY_TMP_DIR)

# --- Storage: files under REGISTRY_DATA_DIR, or S3 through django-storages/boto3 ---------------
REGISTRY_STORAGE = env_choice("REGISTRY_STORAGE", "files", ("files", "s3"))
REGISTRY_PRESIGN_SECONDS = env_int("REGISTRY_PRESIGN_SECONDS", 300, minimum=10)
if REGISTRY_STORAGE == "s3":
    _packages_storage: dict[str, object] = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env_str("REGISTRY_S3_BUCKET", "provisioning-extensions"),
            "endpoint_url": env_str("REGISTRY_S3_ENDPOINT_URL") or None,
            "region_name": env_str("REGISTRY_S3_REGION") or None,
            "access_key": env_str("REGISTRY_S3_ACCESS_KEY_ID") or env_str("AWS_ACCESS_KEY_ID") or None,
            "secret_key": env_str("REGISTRY_S3_SECRET_ACCESS_KEY") or env_str("AWS_SECRET_ACCESS_KEY") or None,
            "location": env_str("REGISTRY_S3_PREFIX", "packages"),
            "file_overwrite": False,
            "querystring_auth": True,
            "querystring_expire": REGISTRY_PRESIGN_SECONDS,
            "default_acl": None,
            "signature_version": "s3v4",
            "object_parameters": {"ContentType": "application/gzip"},
        },
    }
else:
    _packages_storage = {
        "BACKEND": "registry.filestorage.AtomicFileSystemStorage",
        "OPTIONS": {"location": str(REGISTRY_DATA_DIR / "packages"), "file_permissions_mode": 0o644},
    }
STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(REGISTRY_DATA_DIR / "media")},
    },
    "packages": _packages_storage,
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --- Package limits (SPEC 2.4) -----------------------------------------------------------------
REGISTRY_MAX_PACKAGE_BYTES = env_size("REGISTRY_MAX_PACKAGE_BYTES", 50 * 1024**2)
REGISTRY_MAX_UNPACKED_BYTES = env_size("REGISTRY_MAX_UNPACKED_BYTES", 200 * 1024**2)
REGISTRY_MAX_MEMBERS = env_int("REGISTRY_MAX_MEMBERS", 10_000, minimum=1)
REGISTRY_MAX_PATH_BYTES = env_int("REGISTRY_MAX_PATH_BYTES", 255, minimum=16)
REGISTRY_MAX_DEPTH = env_int("REGISTRY_MAX_DEPTH", 32, minimum=1)
REGISTRY_MAX_MANIFEST_BYTES = env_size("REGISTRY_MAX_MANIFEST_BYTES", 64 * 1024)
# Bounds on extension.toml's lists (SPEC 2.4); the JSON Schema the registry serves carries them.
REGISTRY_MAX_PROVIDES = env_int("REGISTRY_MAX_PROVIDES", 32, minimum=1)
REGISTRY_MAX_DEPENDENCIES = env_int("REGISTRY_MAX_DEPENDENCIES", 64, minimum=0)
REGISTRY_MAX_SYSTEM_PACKAGES = env_int("REGISTRY_MAX_SYSTEM_PACKAGES", 64, minimum=0)
REGISTRY_MAX_ENV_VARS = env_int("REGISTRY_MAX_ENV_VARS", 64, minimum=0)
REGISTRY_MAX_BUILD_PATTERNS = env_int("REGISTRY_MAX_BUILD_PATTERNS", 32, minimum=0)
REGISTRY_MAX_BUILD_PATTERN_LENGTH = env_int("REGISTRY_MAX_BUILD_PATTERN_LENGTH", 256, minimum=8)
REGISTRY_MAX_BUILD_PATTERN_WILDCARDS = env_int("REGISTRY_MAX_BUILD_PATTERN_WILDCARDS", 8, minimum=1)

# --- The build sandbox: every step that touches author content runs in a child process --------
# with these limits (extensions.sandbox). "off" runs the steps in the calling process: for
# measuring the sandbox's cost only, never for a registry that takes uploads from strangers.
REGISTRY_SANDBOX = env_choice("REGISTRY_SANDBOX", "process", ("process", "off"))
REGISTRY_SANDBOX_CPU_SECONDS = env_int("REGISTRY_SANDBOX_CPU_SECONDS", 10, minimum=1)
REGISTRY_SANDBOX_README_CPU_SECONDS = env_int("REGISTRY_SANDBOX_README_CPU_SECONDS", 2, minimum=1)
REGISTRY_SANDBOX_MEMORY = env_size("REGISTRY_SANDBOX_MEMORY", 512 * 1024**2, minimum=128 * 1024**2)
REGISTRY_SANDBOX_WALL_SECONDS = env_int("REGISTRY_SANDBOX_WALL_SECONDS", 240, minimum=5)
REGISTRY_SANDBOX_OUTPUT = env_size("REGISTRY_SANDBOX_OUTPUT", 16 * 1024**2, minimum=64 * 1024)
REGISTRY_SANDBOX_OPEN_FILES = env_int("REGISTRY_SANDBOX_OPEN_FILES", 256, minimum=32)
REGISTRY_SANDBOX_ISOLATE_NETWORK = env_bool("REGISTRY_SANDBOX_ISOLATE_NETWORK", True)

# --- A version's configuration interface, read from its KCL schemas in the sandbox ------------
# (extensions.interface). Past a limit the version is published with a truncated interface and
# a warning saying what was left out.
REGISTRY_INTERFACE_MAX_FILES = env_int("REGISTRY_INTERFACE_MAX_FILES", 200, minimum=1)
REGISTRY_INTERFACE_MAX_FILE_SIZE = env_size("REGISTRY_INTERFACE_MAX_FILE_SIZE", 256 * 1024, minimum=1024)
REGISTRY_INTERFACE_MAX_SOURCE = env_size("REGISTRY_INTERFACE_MAX_SOURCE", 4 * 1024**2, minimum=1024)
REGISTRY_INTERFACE_MAX_SCHEMAS = env_int("REGISTRY_INTERFACE_MAX_SCHEMAS", 500, minimum=1)
REGISTRY_INTERFACE_MAX_FIELDS = env_int("REGISTRY_INTERFACE_MAX_FIELDS", 5000, minimum=1)
REGISTRY_INTERFACE_MAX_CHECKS = env_int("REGISTRY_INTERFACE_MAX_CHECKS", 2000, minimum=0)
REGISTRY_INTERFACE_MAX_TEXT = env_int("REGISTRY_INTERFACE_MAX_TEXT", 4000, minimum=80)
REGISTRY_INTERFACE_MAX_SIZE = env_size("REGISTRY_INTERFACE_MAX_SIZE", 1024**2, minimum=64 * 1024)

# --- The signed index (SPEC 6.1; registry.trust): a TUF repository ------------------------------
# Online keys (targets, snapshot, timestamp) live here on every machine that publishes; the root
# key is written apart by `manage.py trust init` and should be kept offline.
REGISTRY_TUF_KEYS_DIR = env_path("REGISTRY_TUF_KEYS_DIR", REGISTRY_DATA_DIR / "tuf-keys")
# Lifetimes (seconds) of each role's metadata; each is re-signed once half of it has passed
# (Celery beat's trust.maintain; in embedded mode also a request for timestamp.json that finds it due).
REGISTRY_TUF_TIMESTAMP_EXPIRES = env_int("REGISTRY_TUF_TIMESTAMP_EXPIRES", 86400, minimum=2)
REGISTRY_TUF_SNAPSHOT_EXPIRES = env_int("REGISTRY_TUF_SNAPSHOT_EXPIRES", 7 * 86400, minimum=2)
REGISTRY_TUF_TARGETS_EXPIRES = env_int("REGISTRY_TUF_TARGETS_EXPIRES", 365 * 86400, minimum=2)
REGISTRY_TUF_ROOT_EXPIRES = env_int("REGISTRY_TUF_ROOT_EXPIRES", 365 * 86400, minimum=2)

# --- Celery: in-process (eager) unless a broker is configured ----------------------------------
CELERY_BROKER_URL = env_url("CELERY_BROKER_URL", "", ("redis", "rediss", "amqp", "amqps", "sqs"))
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
if CELERY_TASK_ALWAYS_EAGER:
    # tasks run in-process; nothing is ever sent. (With a host, kombu does not warn "No hostname was
    # supplied" each time something describes the connection.)
    CELERY_BROKER_URL = "memory://localhost/"
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
REGISTRY_BUILD_TIME_LIMIT = env_int("REGISTRY_BUILD_TIME_LIMIT", 300, minimum=10)
REGISTRY_BUILD_HEARTBEAT_SECONDS = env_int("REGISTRY_BUILD_HEARTBEAT_SECONDS", 10, minimum=1)
# A running build whose heartbeat is older than this is taken to have lost its worker; the reaper
# runs every REGISTRY_BUILD_HEARTBEAT_SECONDS, so a dead worker's build is noticed within both
# (55 s by default).
REGISTRY_BUILD_STALE_SECONDS = env_int("REGISTRY_BUILD_STALE_SECONDS", 45, minimum=2)
REGISTRY_SWEEP_GRACE_SECONDS = env_int("REGISTRY_SWEEP_GRACE_SECONDS", 3600, minimum=0)
# In embedded mode (no broker, so no beat), each web process runs the reaper of stale builds
# every REGISTRY_BUILD_HEARTBEAT_SECONDS and the sweeper of temporary files every few minutes.
REGISTRY_HOUSEKEEPING = env_bool("REGISTRY_HOUSEKEEPING", True)

# --- Cache -------------------------------------------------------------------------------------
_cache_url = env_url("CACHE_URL", "", ("redis", "rediss", "unix"))
if _cache_url:
    CACHES: dict[str, dict[str, object]] = {
        # Redis down: an empty cache that keeps nothing (rate limits not enforced), never an error.
        "default": {"BACKEND": "registry.cache.FailSoftRedisCache", "LOCATION": _cache_url}
    }
else:
    # Files under the data dir: throttling counters are shared by every process on this machine.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(REGISTRY_DATA_DIR / "cache"),
            "OPTIONS": {"MAX_ENTRIES": 10_000},
        }
    }

# --- Downloads and the static index ------------------------------------------------------------
# Download counts never write on the download path: they are buffered (in each process, or in
# Redis when CACHE_URL or the broker is Redis) and written in batches every this many seconds
# (registry.downloadcounts); a crash loses at most one interval of counts.
REGISTRY_DOWNLOADS_FLUSH_SECONDS = env_int("REGISTRY_DOWNLOADS_FLUSH_SECONDS", 5, minimum=1)
REGISTRY_DOWNLOADS_REDIS_URL = next(
    (url for url in (_cache_url, CELERY_BROKER_URL) if url.startswith(("redis://", "rediss://", "unix://"))), ""
)
# Behind nginx: answer package downloads (files storage) with X-Accel-Redirect to this internal
# location, so nginx sends the bytes (docs/deploy.md has the configuration). Empty: gunicorn does.
REGISTRY_ACCEL_REDIRECT = env_url_prefix("REGISTRY_ACCEL_REDIRECT", "")
# Every index document is also written to package storage as index/NAME after each change, for
# nginx or a CDN to serve /api/v1/index/ without Python (registry.staticindex).
REGISTRY_STATIC_INDEX = env_bool("REGISTRY_STATIC_INDEX", True)

# --- API ---------------------------------------------------------------------------------------
REGISTRY_RATE_PUBLISH = env_rate("REGISTRY_RATE_PUBLISH", "60/minute")
REGISTRY_RATE_AUTH_FAILURE = env_rate("REGISTRY_RATE_AUTH_FAILURE", "20/minute")
REGISTRY_RATE_WRITE = env_rate("REGISTRY_RATE_WRITE", "600/minute")
REGISTRY_RATE_RESOLVE = env_rate("REGISTRY_RATE_RESOLVE", "1200/minute")
# Seconds one resolution may take (resolve API, install plans); past it: 422 too_complex.
REGISTRY_RESOLVE_TIMEOUT = env_seconds("REGISTRY_RESOLVE_TIMEOUT", 2.0, minimum=0.05, maximum=60.0)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "DEFAULT_RENDERER_CLASSES": ["registry.renderers.SafeJSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["registry.parsers.SafeJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "registry.openapi.RegistrySchema",
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "registry.exception_handler.exception_handler",
    "NUM_PROXIES": env_int("REGISTRY_NUM_PROXIES", 0),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Provisioning extension registry",
    "DESCRIPTION": "Publish, build, resolve and download provisioning extensions.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "registry.openapi.add_index_document"],
}

# --- Trusted publishing (OpenID Connect, SPEC 6.3) ----------------------------------------------
# The issuers whose tokens may be exchanged for a publish token (GitHub Actions and GitLab.com by
# default); a trusted publisher can only name one of these.
REGISTRY_OIDC_ISSUERS = env_issuers(
    "REGISTRY_OIDC_ISSUERS", ["https://token.actions.githubusercontent.com", "https://gitlab.com"]
)
# Clock skew allowed on exp, nbf and iat.
REGISTRY_OIDC_LEEWAY = env_seconds("REGISTRY_OIDC_LEEWAY", 30, minimum=0, maximum=300)
# The lifetime of the publish token an exchange answers (at most 15 minutes, SPEC 6.3).
REGISTRY_OIDC_TOKEN_SECONDS = env_seconds("REGISTRY_OIDC_TOKEN_SECONDS", 900, minimum=60, maximum=900)
# An issuer's discovery document and keys are cached this long; a token signed with a key not in
# the cache fetches them again, but never more often than every REGISTRY_OIDC_JWKS_REFRESH_SECONDS.
REGISTRY_OIDC_JWKS_SECONDS = env_seconds("REGISTRY_OIDC_JWKS_SECONDS", 3600, minimum=10, maximum=86400)
REGISTRY_OIDC_JWKS_REFRESH_SECONDS = env_seconds("REGISTRY_OIDC_JWKS_REFRESH_SECONDS", 60, minimum=1, maximum=3600)
REGISTRY_OIDC_HTTP_TIMEOUT = env_seconds("REGISTRY_OIDC_HTTP_TIMEOUT", 5, minimum=0.5, maximum=30)
# A pending publisher reserves its name this many days (not renewable); a user holds at most
# REGISTRY_OIDC_MAX_PENDING reserved names at a time.
REGISTRY_OIDC_PENDING_DAYS = env_int("REGISTRY_OIDC_PENDING_DAYS", 14, minimum=1)
REGISTRY_OIDC_MAX_PENDING = env_int("REGISTRY_OIDC_MAX_PENDING", 3, minimum=0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {
        "handlers": ["console"],
        "level": env_choice("LOG_LEVEL", "info", ("debug", "info", "warning", "error", "critical")).upper(),
    },
    "loggers": {
        "django.server": {"level": "WARNING"},
        "celery.app.trace": {"level": "WARNING"},
    },
}
