"""LangHost settings: everything comes from the environment, with embedded defaults.

The defaults give a working single-process install: SQLite (WAL) in the data dir, the
in-memory channel layer, and the plugin runtime spawned over stdio.
"""

import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from langhost.base import data_dir
from langhost.base.process_secrets import value as secret
from langhost.base.sqlite import use_a_sqlite_that_loads_extensions

use_a_sqlite_that_loads_extensions()  # before Django's SQLite backend imports `sqlite3`

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


# Created, with the generated secret key, by the entry points (manage.py, asgi.py) through
# `langhost.base.data_dir.prepare()`: importing these settings writes nothing.
DATA_DIR = data_dir.location()
SECRET_KEY = secret("DJANGO_SECRET_KEY") or data_dir.stored_secret_key(DATA_DIR)
# Earlier secret keys, comma-separated: sessions and stored secrets made under them still work
# until `manage.py rotate_secrets` has re-encrypted the secrets under SECRET_KEY.
SECRET_KEY_FALLBACKS = [key.strip() for key in
                        secret("DJANGO_SECRET_KEY_FALLBACKS", "").split(",") if key.strip()]
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",")

INSTALLED_APPS = [
    # daphne first, so `runserver` serves ASGI (HTTP and WebSockets).
    "daphne",
    "langhost.apps.LangHostAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "axes",
    "rest_framework_simplejwt.token_blacklist",
    "langhost.apps.LangHostConfig",
    "accounts",
    "ledger",
    "runners",
    "runners.knowledge",
    "runners.skills",
    "runners.webhooks",
    "runners.schedules",
    "runners.evals",
]

# Django's and django-csp's middleware, with their hooks run on the event loop rather than in
# a thread each (langhost/middleware.py); AxesMiddleware is async already.
MIDDLEWARE = [
    "langhost.middleware.SecurityMiddleware",
    "langhost.middleware.SessionMiddleware",
    "langhost.middleware.CommonMiddleware",
    "langhost.middleware.CsrfViewMiddleware",
    "langhost.middleware.AuthenticationMiddleware",
    "langhost.middleware.MessageMiddleware",
    "langhost.middleware.XFrameOptionsMiddleware",
    "langhost.middleware.CSPMiddleware",
    # Last: answers a sign-in attempt on a locked-out account (accounts/signin.py).
    "axes.middleware.AxesMiddleware",
]

# Scripts only from this origin (the admin, the playground, Swagger UI's split view); inline
# style attributes stay allowed (Django's admin and Swagger UI set some).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

# Production behind one switch: HTTPS only (behind a proxy that sets X-Forwarded-Proto).
LANGHOST_SECURE = env_bool("LANGHOST_SECURE", False)
if LANGHOST_SECURE:
    SECURE_SSL_REDIRECT = True
    # A process manager probes each process directly, over plain HTTP.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = 31536000
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True

# Failed sign-ins (accounts/signin.py): an account is refused for a while after
# LANGHOST_SIGNIN_FAILURES failures in a row, on every sign-in door.
AUTHENTICATION_BACKENDS = [
    "accounts.signin.SignInThrottleBackend",
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Per address (any accounts): SignInThrottleBackend, at a higher bar than the pair's limit.
LANGHOST_SIGNIN_ADDRESS_FAILURES = int(os.environ.get("LANGHOST_SIGNIN_ADDRESS_FAILURES", 100))
# Per account (every address): past this many failures, attempts from addresses it never
# signed in from wait, twice as long after each failure, up to the maximum.
LANGHOST_SIGNIN_ACCOUNT_FAILURES = int(os.environ.get("LANGHOST_SIGNIN_ACCOUNT_FAILURES", 20))
LANGHOST_SIGNIN_MAX_WAIT_SECONDS = float(os.environ.get("LANGHOST_SIGNIN_MAX_WAIT_SECONDS", 300))
# Proxies in front (addresses or networks, comma-separated) whose X-Forwarded-For names the
# client: deploy/'s nginx on the same host is 127.0.0.1. Empty: REMOTE_ADDR is the client.
LANGHOST_TRUSTED_PROXIES = os.environ.get("LANGHOST_TRUSTED_PROXIES", "")
# security.W001-W003 look for Django's middleware by dotted path; LangHost lists subclasses
# that run on the event loop, which langhost/checks.py checks in their place.
SILENCED_SYSTEM_CHECKS = ["axes.W006", "security.W001", "security.W002", "security.W003"]
AXES_FAILURE_LIMIT = int(os.environ.get("LANGHOST_SIGNIN_FAILURES", 10))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("LANGHOST_SIGNIN_COOLOFF_MINUTES", 15)))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "accounts.signin.client_address"
AXES_RESET_ON_SUCCESS = True
AXES_USERNAME_CALLABLE = "accounts.signin.username_of"
AXES_LOCKOUT_CALLABLE = "accounts.signin.lockout_response"
AXES_DISABLE_ACCESS_LOG = True  # failures are what it is for; successes are not recorded
AXES_VERBOSE = False

ROOT_URLCONF = "langhost.urls"
WSGI_APPLICATION = None
ASGI_APPLICATION = "langhost.asgi.application"

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

_sqlite_default = f"sqlite:///{DATA_DIR / 'langhost.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(secret("DATABASE_URL", _sqlite_default))}
# A connection that a database restart broke is replaced at its next use instead of failing
# every query of a long-lived process (the runtime worker) until that process restarts.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Request threads are kept (langhost/handlers.py), and so are their connections: opening one
# (with SQLite's pragmas) cost more than the queries of a run.
DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("LANGHOST_DB_CONN_MAX_AGE", 600))
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the run loop write while admin pages read; IMMEDIATE avoids
    # "database is locked" upgrades from read to write transactions. synchronous=NORMAL keeps
    # every commit through a crash of LangHost (kill -9 included) and loses the last ones only
    # to a crash of the machine; FULL (an fsync per commit) costs the run loop ~15% of its
    # latency (bench/run_overhead.py: 1.45-1.50 -> 1.68-1.70), over its budget. README: Durability.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous={};".format(
            os.environ.get("LANGHOST_SQLITE_SYNCHRONOUS", "NORMAL")),
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    # Tests use a real file too: shared-cache in-memory SQLite fails at once with "table is
    # locked" where a file database waits, so the runtime's threads would race the tests.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-langhost.sqlite3")}

AUTH_USER_MODEL = "accounts.User"
# Argon2id first (Django's recommendation: memory-hard, and a sign-in costs a fraction of
# what PBKDF2's million rounds do); the others still check, and upgrade, older hashes.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.Argon2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2PasswordHasher",
    "django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
    "django.contrib.auth.hashers.ScryptPasswordHasher",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
MEDIA_ROOT = DATA_DIR / "media"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "admin:login"

REDIS_URL = secret("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # A receive blocks in Redis for up to 5 s; redis-py's default read timeout (5 s
            # in recent versions) would race it and fail idle receives at random.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 15}],
                       # A process's reply channels share one Redis list, and the runtime
                       # workers' queue takes every run start: room for bursts, not for 100.
                       "capacity": 2000},
        }
    }
    # Throttles and sign-in failure counts, shared by every process.
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": REDIS_URL}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

REST_FRAMEWORK = {
    # JWT first: its `WWW-Authenticate` header makes unauthenticated requests 401, not 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.RevocableJWTAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Multipart only where files are uploaded (artifacts): daphne's HTTP layer (Twisted)
    # parses multipart bodies itself and answers a bodiless 400 to a malformed one.
    "DEFAULT_PARSER_CLASSES": [
        "langhost.base.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
    ],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "langhost.base.negotiation.ContentNegotiation",
    "DEFAULT_PAGINATION_CLASS": "langhost.base.api.EnvelopePagination",
    "PAGE_SIZE": 20,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "runners.api.exceptions.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # Registrations per client address (accounts.signin.ClientAddressThrottle).
    # A user's run starts, by any door (runners.conversations.services); not superusers'.
    "DEFAULT_THROTTLE_RATES": {
        "register": os.environ.get("LANGHOST_REGISTRATIONS_PER_ADDRESS", "20/hour"),
        # Bytes a user's state writes may take a period (runners.api.throttles): two writes
        # of the largest state a second, or thousands of small ones.
        "state-writes": os.environ.get("LANGHOST_STATE_WRITE_BYTES_PER_USER", "2097152/second"),
        "run-starts": os.environ.get("LANGHOST_RUNS_PER_USER", "10/second")},
}

SIMPLE_JWT = {
    "ACCESS_TOKEN_LIFETIME": timedelta(minutes=60),
    "REFRESH_TOKEN_LIFETIME": timedelta(days=7),
    "AUTH_HEADER_TYPES": ("Bearer",),
}

SPECTACULAR_SETTINGS = {
    "TITLE": "LangHost API",
    "DESCRIPTION": "Run AI agents from LangBot plugins; watch every run.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI assets are served from the installed package, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums",
                             "langhost.base.schema.document_errors"],
    # An agent type's default strategy may be blank (the runner's); a request's may not.
    "ENUM_NAME_OVERRIDES": {
        "MultitaskStrategyEnum": "runners.protocol.MULTITASK_STRATEGIES",
        # A run's status is in several components (a run, a run with its steps): one name.
        "RunStatusEnum": "ledger.models.RunStatus",
    },
}

# Plugin runtime: unset URL = spawn the SDK runtime over stdio in this process.
# A provider's `api_key_env` may name only variables with this prefix: never the host's own
# secrets (DJANGO_SECRET_KEY, the admin password, a database URL).
LANGHOST_PROVIDER_KEY_ENV_PREFIX = os.environ.get("LANGHOST_PROVIDER_KEY_ENV_PREFIX",
                                                  "LANGHOST_PROVIDER_")
# What one user's state may take (ledger.services.conversations): keys per state scope, and
# bytes of a conversation's state in all (a value takes 256 KiB at most).
LANGHOST_STATE_MAX_KEYS = int(os.environ.get("LANGHOST_STATE_MAX_KEYS", 1000))
LANGHOST_STATE_MAX_BYTES = int(os.environ.get("LANGHOST_STATE_MAX_BYTES", 1024 * 1024))
# The body a request without a signed-in user may send (sign-in, registration, first admin).
LANGHOST_ANONYMOUS_BODY_MAX_BYTES = int(os.environ.get("LANGHOST_ANONYMOUS_BODY_MAX_BYTES",
                                                       64 * 1024))
# Threads for a request's heavy writes (a conversation's state), apart from the thread that
# starts and ends runs: one user's large write cannot hold up another's run.
LANGHOST_HEAVY_WRITE_THREADS = int(os.environ.get("LANGHOST_HEAVY_WRITE_THREADS", 2))
# Confine the plugin runtime and its plugins (runners/runtime/sandbox.py): auto, required,
# bwrap, namespaces, off.
LANGHOST_PLUGIN_SANDBOX = os.environ.get("LANGHOST_PLUGIN_SANDBOX", "auto")


def _services_ports() -> set[int]:
    """LangHost's own TCP ports: the web port, the database's and Redis' (where they are TCP)."""
    ports = {int(os.environ.get("LANGHOST_PORT", "8000"))}
    database = DATABASES["default"]
    if not database["ENGINE"].endswith("sqlite3"):
        ports.add(int(database.get("PORT") or 5432))
    if REDIS_URL:
        ports.add(urlsplit(REDIS_URL).port or 6379)
    return ports


def _ports(name: str) -> set[int]:
    return {int(port) for port in os.environ.get(name, "").replace(",", " ").split()}


# No confined process (plugins, pip, box commands) connects over TCP to these ports:
# LangHost's own services, and `LANGHOST_SANDBOX_CLOSED_PORTS`, less what the operator opens
# (`LANGHOST_SANDBOX_OPEN_PORTS`). Landlock closes a port on every host, not only this one.
LANGHOST_SANDBOX_CLOSED_PORTS = sorted(
    (_services_ports() | _ports("LANGHOST_SANDBOX_CLOSED_PORTS"))
    - _ports("LANGHOST_SANDBOX_OPEN_PORTS"))
# Kept out of a confined process's sight even where a path it reads holds them (a checkout
# under /usr, say): the data dir, and a SQLite database wherever it is.
LANGHOST_SANDBOX_HIDDEN = [str(DATA_DIR)] + (
    [str(DATABASES["default"]["NAME"])] if DATABASES["default"]["ENGINE"].endswith("sqlite3")
    else [])
# Whether the process that owns work (runners/work.py) fails the runs whose process died (their
# lease ran out) once a tick.
LANGHOST_REAP_STALE_RUNS = env_bool("LANGHOST_REAP_STALE_RUNS", True)
# Whether the process that owns work ingests knowledge documents in its
# background (else `manage.py ingest_knowledge` does).
LANGHOST_KNOWLEDGE_INGESTION = env_bool("LANGHOST_KNOWLEDGE_INGESTION", True)
# Documents a process ingests at once, never two of one project: one project's large upload
# does not hold up another's (runners/knowledge/worker.py).
LANGHOST_KNOWLEDGE_INGESTION_SLOTS = int(os.environ.get("LANGHOST_KNOWLEDGE_INGESTION_SLOTS", 3))
# What a project's knowledge may hold: a document's chunks, all its bases' chunks, and the bytes
# of all its documents.
LANGHOST_KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT = int(
    os.environ.get("LANGHOST_KNOWLEDGE_MAX_CHUNKS_PER_DOCUMENT", 25_000))
LANGHOST_KNOWLEDGE_MAX_CHUNKS_PER_PROJECT = int(
    os.environ.get("LANGHOST_KNOWLEDGE_MAX_CHUNKS_PER_PROJECT", 250_000))
LANGHOST_KNOWLEDGE_MAX_BYTES_PER_PROJECT = int(
    os.environ.get("LANGHOST_KNOWLEDGE_MAX_BYTES_PER_PROJECT", 2**30))
# The sandbox box (runners/box/): its backend (`sandbox`, confined as plugins are; the SDK's
# box server's `nsjail`, `docker` or `e2b`; `host-unsafe`, the SDK's `host`, which isolates
# nothing), and the limits of one call: seconds, memory, processes, output returned, a file's
# size.
LANGHOST_BOX_BACKEND = os.environ.get("LANGHOST_BOX_BACKEND", "sandbox")
LANGHOST_BOX_PROCESSES = int(os.environ.get("LANGHOST_BOX_PROCESSES", 64))
LANGHOST_BOX_EXEC_SECONDS = int(os.environ.get("LANGHOST_BOX_EXEC_SECONDS", 30))
LANGHOST_BOX_MEMORY_MB = int(os.environ.get("LANGHOST_BOX_MEMORY_MB", 1024))
LANGHOST_BOX_OUTPUT_BYTES = int(os.environ.get("LANGHOST_BOX_OUTPUT_BYTES", 16 * 1024))
LANGHOST_BOX_FILE_BYTES = int(os.environ.get("LANGHOST_BOX_FILE_BYTES", 1024 * 1024))
# A connection that searches a knowledge base's vectors on SQLite reads the file through a
# memory map this large (its scan reads every vector), not through SQLite's small page cache.
LANGHOST_SQLITE_MMAP_BYTES = int(os.environ.get("LANGHOST_SQLITE_MMAP_BYTES", 256 * 1024 * 1024))
# Webhooks (runners/webhooks/): whether the process that owns work delivers
# them in its background (else `manage.py deliver_webhooks` does), whether private and
# loopback addresses may be called, and each delivery's time-out, attempts and first backoff.
LANGHOST_WEBHOOK_DELIVERY = env_bool("LANGHOST_WEBHOOK_DELIVERY", True)
# How long a run's question to a person stays open, unless it says (at most the maximum).
LANGHOST_INTERACTION_TTL_SECONDS = int(os.environ.get("LANGHOST_INTERACTION_TTL_SECONDS", 24 * 3600))
LANGHOST_INTERACTION_MAX_SECONDS = int(os.environ.get("LANGHOST_INTERACTION_MAX_SECONDS", 7 * 24 * 3600))
# A schedule's tick found later than this (LangHost was down) follows its `missed_ticks`.
LANGHOST_SCHEDULE_GRACE_SECONDS = int(os.environ.get("LANGHOST_SCHEDULE_GRACE_SECONDS", 60))
# Ended runs older than this many days leave the ledger (`manage.py prune_ledger`, and the
# process that owns work once an hour); 0 keeps every run.
LANGHOST_LEDGER_RETENTION_DAYS = int(os.environ.get("LANGHOST_LEDGER_RETENTION_DAYS", 0))
# The process that owns work starts queued runs whose process went away, and fires schedules.
LANGHOST_BACKGROUND_WORK = env_bool("LANGHOST_BACKGROUND_WORK", True)
LANGHOST_WEBHOOK_ALLOW_PRIVATE = env_bool("LANGHOST_WEBHOOK_ALLOW_PRIVATE", False)
LANGHOST_WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("LANGHOST_WEBHOOK_TIMEOUT_SECONDS", 10))
LANGHOST_WEBHOOK_ATTEMPTS = int(os.environ.get("LANGHOST_WEBHOOK_ATTEMPTS", 6))
LANGHOST_WEBHOOK_BACKOFF_SECONDS = float(os.environ.get("LANGHOST_WEBHOOK_BACKOFF_SECONDS", 2))
# A message's files as runners get them (runners/execution/attachments.py): inline up to
# this size, and through a link signed for the run, valid this long while the run is active.
# The link's origin is the one the message came through, else this URL.
LANGHOST_ATTACHMENT_INLINE_BYTES = int(os.environ.get("LANGHOST_ATTACHMENT_INLINE_BYTES",
                                                      64 * 1024))
LANGHOST_ATTACHMENT_URL_SECONDS = int(os.environ.get("LANGHOST_ATTACHMENT_URL_SECONDS", 600))
LANGHOST_PUBLIC_URL = os.environ.get("LANGHOST_PUBLIC_URL", "")
# Whether a run's actor carries the user's e-mail as their name (else their full name, if any).
LANGHOST_RUNNERS_SEE_EMAIL = os.environ.get("LANGHOST_RUNNERS_SEE_EMAIL", "").lower() in (
    "1", "true", "yes")
LANGHOST_RUNTIME_URL = os.environ.get("LANGHOST_RUNTIME_URL") or None
LANGHOST_RUNTIME_TOKEN = secret("LANGHOST_RUNTIME_TOKEN") or None
# Set in multi-process deployments: `manage.py runtime` owns the link, web processes reach it
# through the Channels layer (needs REDIS_URL).
LANGHOST_RUNTIME_WORKER = env_bool("LANGHOST_RUNTIME_WORKER", False)
# Who may read `GET /metrics` (Prometheus): whoever sends this bearer token; unset, this
# machine only.
LANGHOST_METRICS_TOKEN = secret("LANGHOST_METRICS_TOKEN", "")
LANGHOST_PLUGINS_DIR = Path(
    os.environ.get("LANGHOST_PLUGINS_DIR", BASE_DIR / "plugins")
).resolve()
# How often a ready runtime is asked again for its plugins, runners and tools (0: never; it is
# still asked whenever it (re)connects or the plugin folders change).
LANGHOST_RUNTIME_REFRESH_SECONDS = float(os.environ.get("LANGHOST_RUNTIME_REFRESH_SECONDS", 30))
# A `running` run's lease: the process executing it renews it every sixth of this; a runtime
# owner fails runs whose lease ran out (their process died) about as often.
LANGHOST_RUN_LEASE_SECONDS = float(os.environ.get("LANGHOST_RUN_LEASE_SECONDS", 120))
# What one run's results may take in the ledger (their JSON); past it the run fails with
# `run.output_limit`.
LANGHOST_RUN_MAX_STORED_BYTES = int(os.environ.get("LANGHOST_RUN_MAX_STORED_BYTES",
                                                   16 * 1024 * 1024))
LANGHOST_ARTIFACT_MAX_BYTES = int(os.environ.get("LANGHOST_ARTIFACT_MAX_BYTES", 25 * 1024 * 1024))
# The one upload setting: a request body may carry the largest artifact base64-encoded in JSON
# (4/3 of its size) with room for the rest of the body; above it, a JSON 413.
DATA_UPLOAD_MAX_MEMORY_SIZE = LANGHOST_ARTIFACT_MAX_BYTES * 4 // 3 + 1024 * 1024
# Conversation artifacts go through Django's storage API ("artifacts" alias): files in the
# data dir by default; point the backend elsewhere (e.g. S3) without touching the code.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "artifacts": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(DATA_DIR / "artifacts")},
    },
}

# `json`: one JSON object a line, with the run's ids on the lines written during a run.
LANGHOST_LOG_FORMAT = os.environ.get("LANGHOST_LOG_FORMAT", "plain")
if LANGHOST_LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LANGHOST_LOG_FORMAT is 'plain' or 'json', not "
                               f"{LANGHOST_LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
                   "json": {"()": "runners.observability.logs.JsonLines"}},
    "filters": {"run": {"()": "runners.observability.logs.RunContext"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["run"],
                             "formatter": LANGHOST_LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": os.environ.get("LANGHOST_LOG_LEVEL", "INFO")},
    "loggers": {"daphne": {"level": "WARNING"}, "django.channels.server": {"level": "WARNING"},
                "axes": {"level": "WARNING"}},
}
