"""Django settings for Triton Model Hub, read from the environment.

Every variable is listed in ``.env.example`` and in the README. A fresh checkout with no
environment runs on SQLite under ``var/``; ``make run`` adds a real Redis and Triton and passes
their addresses to its children through the same variables.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

from webapp.env import (
    database_from_url,
    env_api_key,
    env_bool,
    env_bytes,
    env_hostport,
    env_int,
    env_list,
    env_load_timeouts,
    env_secret,
    env_str,
)
from webapp.private_files import private_dir, private_sqlite_file, read_or_create_secret
from webapp.stack_connections import adopt_running_stack

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("HUB_VAR_DIR", str(BASE_DIR / "var"))).resolve()
# 0700: it holds the secret key and the SQLite database (webapp/private_files.py).
private_dir(VAR_DIR)
# `python manage.py ...` typed next to a running `make run` reaches its Redis and Triton (ports
# and Triton's key are chosen at start); the environment still wins (webapp/stack_connections.py).
adopt_running_stack(VAR_DIR, os.environ)

DEBUG = env_bool("DEBUG", default=False)


def _default_secret_key() -> str:
    # The embedded default keeps a generated key in var/ so sessions survive restarts without
    # anyone having to invent a secret; production sets SECRET_KEY (or SECRET_KEY_FILE).
    # Created 0600 from its first byte, whatever the umask.
    return read_or_create_secret(VAR_DIR / "secret_key", lambda: secrets.token_urlsafe(50))


SECRET_KEY = env_secret("SECRET_KEY", default="") or _default_secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "channels",
    "django_htmx",
    "axes",
    "webapp.accounts",
    "webapp.registry",
    "webapp.ops",
    "webapp.nodes",
    "webapp.sso",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "webapp.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Between sessions and CommonMiddleware, as Django asks: the language of the browser
    # (Accept-Language) or of the switcher's cookie; LanguagePreferenceMiddleware refines it.
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After AuthenticationMiddleware (which would overwrite request.user) and still before
    # CsrfViewMiddleware.process_view, which reads the exemption it sets.
    "webapp.accounts.auth.TokenAuthenticationMiddleware",
    # After both: a signed-in user's saved language wins on pages; the API follows
    # Accept-Language alone (webapp/accounts/language.py).
    "webapp.accounts.language.LanguagePreferenceMiddleware",
    # Before CSRF's process_view parses a body: refuses anonymous and oversized bodies unread.
    "webapp.request_limits.RequestBodyGuard",
    "webapp.accounts.auth.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Turns a HubError that no view caught into its JSON or page answer (webapp/errors.py).
    "webapp.errors.HubErrorMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it answers a locked-out sign-in with its lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "webapp.urls"
ASGI_APPLICATION = "webapp.edge.asgi.application"
WSGI_APPLICATION = None

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
                "webapp.accounts.context.role",
                "webapp.ops.health.banner",
                "webapp.sso.context.sign_in_options",
            ],
        },
    },
]

VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": database_from_url(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'hub.sqlite3'}"),
        base_dir=BASE_DIR,
    )
}
if str(DATABASES["default"]["ENGINE"]).endswith("sqlite3"):
    # Web and worker processes write one SQLite file: WAL lets readers go on while one writes,
    # IMMEDIATE transactions take the write lock up front instead of failing half-way, and the
    # timeout waits for it. Tests use a file too, so that worker processes can see their data.
    # Keep connections: opening SQLite per request cost ~5 ms of every upload chunk.
    DATABASES["default"]["CONN_MAX_AGE"] = 60
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-hub.sqlite3")}
    # Password hashes and API tokens: create the file 0600 before SQLite would make it 0644.
    private_sqlite_file(Path(str(DATABASES["default"]["NAME"])))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 12},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "models"
LOGOUT_REDIRECT_URL = "login"

# English is the source language; Simplified Chinese is translated (docs/i18n.md). "en-us"
# resolves to "en" of LANGUAGES, so browsers and tests without a preference get English.
LANGUAGE_CODE = "en-us"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(VAR_DIR / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every request otherwise
# The demo photos are served as static files too (the Try it panel offers them as presets).
STATICFILES_DIRS = [BASE_DIR / "static", ("demo", BASE_DIR / "demo" / "images")]
# Serve straight from the source folders too, so `make run` needs no collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
# HTTPS=true: the UI is reached over HTTPS only, through a TLS-terminating proxy (compose's
# `proxy`). Cookies are then secure, browsers are told to use HTTPS for a year (HSTS), plain
# HTTP is redirected, and the proxy's X-Forwarded-Proto says which scheme the client used
# (trusted: only the proxy reaches the web service). SECURE_COOKIES=true alone is the older,
# narrower switch and still works.
HTTPS = env_bool("HTTPS", default=False)
SESSION_COOKIE_SECURE = HTTPS or env_bool("SECURE_COOKIES", default=False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    # Container health checks probe the web service directly over plain HTTP.
    SECURE_REDIRECT_EXEMPT = [r"^api/v1/health/live$"]
    SECURE_HSTS_SECONDS = env_int("HSTS_SECONDS", default=31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HSTS_INCLUDE_SUBDOMAINS", default=False)
    SECURE_HSTS_PRELOAD = env_bool("HSTS_PRELOAD", default=False)

# Sign-in throttling (django-axes): after SIGNIN_FAILURE_LIMIT failed sign-ins for one user name
# from one address, that pair is refused for SIGNIN_COOLOFF_MINUTES (also on /admin/).
# `python manage.py axes_reset` lifts every lock at once.
AXES_FAILURE_LIMIT = env_int("SIGNIN_FAILURE_LIMIT", default=5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("SIGNIN_COOLOFF_MINUTES", default=15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "accounts/locked_out.html"
AXES_VERBOSE = False
# New API tokens made on the account page or through the API expire after this many days
# unless their owner chooses otherwise (manage.py apitoken makes tokens without expiry).
TOKEN_DEFAULT_DAYS = env_int("TOKEN_DEFAULT_DAYS", default=90, minimum=1)
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Local accounts: Django's password check, limited by LOCAL_SIGN_IN.
    "webapp.sso.backends.LocalBackend",
    # LDAP through the sign-in form, when LDAP_SERVER_URI is set (django-auth-ldap).
    "webapp.sso.backends.LdapBackend",
    # Sessions of people who signed in through OpenID Connect (webapp/sso/).
    "webapp.sso.backends.DirectoryBackend",
]

# --- Single sign-on (docs/sso.md) ---------------------------------------------------------------
# OpenID Connect is on when OIDC_ISSUER is set: the provider's address, whose
# /.well-known/openid-configuration must name exactly this issuer. https:// only (http:// on a
# loopback address, for tests).
OIDC_ISSUER = env_str("OIDC_ISSUER")
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID")
OIDC_CLIENT_SECRET = env_secret("OIDC_CLIENT_SECRET", default="")
OIDC_SCOPES = env_str("OIDC_SCOPES") or "openid profile email"
# The ID token's (or userinfo's) claim that lists the person's groups.
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM") or "groups"
# The name on the sign-in page's button: "Sign in with <name>".
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME") or "OpenID Connect"
OIDC_TIMEOUT_SECONDS = env_int("OIDC_TIMEOUT_SECONDS", default=10, minimum=1)
# ";"-separated GROUP=ROLE entries (the role follows the last "="): directory groups to roles.
SSO_ROLE_MAP = env_str("SSO_ROLE_MAP")
# An SSO user's API tokens stop working this many seconds after the directory last vouched for
# them (their last sign-in through it); a day by default.
SSO_TOKEN_MAX_AGE = env_int("SSO_TOKEN_MAX_AGE", default=86_400, minimum=60)
# LDAP sign-in through the normal form is on when LDAP_SERVER_URI is set (ldap:// or ldaps://).
# The hub binds as LDAP_BIND_DN to find the person under LDAP_USER_SEARCH_BASE with
# LDAP_USER_FILTER (%(user)s is what they typed, escaped), then binds as them.
LDAP_SERVER_URI = env_str("LDAP_SERVER_URI")
LDAP_BIND_DN = env_str("LDAP_BIND_DN")
LDAP_BIND_PASSWORD = env_secret("LDAP_BIND_PASSWORD", default="")
LDAP_USER_SEARCH_BASE = env_str("LDAP_USER_SEARCH_BASE")
LDAP_USER_FILTER = env_str("LDAP_USER_FILTER") or "(uid=%(user)s)"
# Groups are searched under LDAP_GROUP_SEARCH_BASE; LDAP_GROUP_TYPE says how they list members:
# groupOfNames (member DNs), groupOfUniqueNames (uniqueMember DNs), posixGroup (memberUid), or
# activeDirectory (objectClass group, member DNs).
LDAP_GROUP_SEARCH_BASE = env_str("LDAP_GROUP_SEARCH_BASE")
LDAP_GROUP_TYPE = env_str("LDAP_GROUP_TYPE") or "groupOfNames"
LDAP_START_TLS = env_bool("LDAP_START_TLS", default=False)
# A PEM file of the CA that signed the directory's certificate (ldaps:// or StartTLS); empty
# trusts the system's CAs. The certificate is always checked.
LDAP_CA_FILE = env_str("LDAP_CA_FILE")
# Each connect and each directory operation gives up after this many seconds.
LDAP_TIMEOUT_SECONDS = env_int("LDAP_TIMEOUT_SECONDS", default=5, minimum=1)
# How often the workers ask the directory whether LDAP users are still there and in which
# groups; their API tokens stop 15 minutes after the last answer that vouched for them.
LDAP_RECHECK_SECONDS = env_int("LDAP_RECHECK_SECONDS", default=300, minimum=60)
# "everyone" (default): every local account may sign in with its password. "admins": only
# local accounts with the admin role, and those named in LOCAL_SIGN_IN_ACCOUNTS (a break-glass
# account), the rest sign in through the directory.
LOCAL_SIGN_IN = env_str("LOCAL_SIGN_IN") or "everyone"
LOCAL_SIGN_IN_ACCOUNTS = env_list("LOCAL_SIGN_IN_ACCOUNTS", default=[])

# Capture of real requests (docs/capture.md): capturing stops for a model (never serving) while
# writing would leave less than this free on the model store's disk.
CAPTURE_MIN_FREE_BYTES = env_bytes("CAPTURE_MIN_FREE_BYTES", default=512 * 1024 * 1024)

# --- Model store and Triton -------------------------------------------------------------------
MODEL_STORE_ROOT = Path(env_str("MODEL_STORE_ROOT", str(VAR_DIR / "store"))).resolve()
TRITON_URL = env_hostport("TRITON_URL", default="127.0.0.1:8000")
TRITON_GRPC_URL = env_hostport("TRITON_GRPC_URL", default="127.0.0.1:8001")
TRITON_METRICS_URL = env_hostport("TRITON_METRICS_URL", default="127.0.0.1:8002")
TRITON_TIMEOUT_SECONDS = env_int("TRITON_TIMEOUT_SECONDS", default=10, minimum=1)
# How long a model's load may take, per target (serve, rollback, load, reconcile):
# LOAD_TIMEOUT_SECONDS for all, LOAD_TIMEOUT_<TARGET>_SECONDS for one; npu_ge compiles at load
# and gets 600 s unless set. A load still going on then is waited out 3x as long, not failed
# (model_store/load_timeouts.py, docs/ge-backend.md#loading-takes-minutes).
LOAD_TIMEOUTS = env_load_timeouts(default_s=180.0)
# The key Triton's restricted repository API expects (index, load, unload; security finding 14,
# model_store/runtime/access.py). `make run` passes its embedded Triton's key; in compose the
# operator sets it (or TRITON_API_KEY_FILE) for Triton and the hub alike. Empty: none is sent.
TRITON_API_KEY = env_api_key("TRITON_API_KEY")

# --- Uploads ------------------------------------------------------------------------------------
UPLOAD_MAX_BYTES = env_bytes("UPLOAD_MAX_BYTES", default=4 << 30)
# Large chunks amortise the per-request checks (auth, role, ownership): 32 MiB reached 0.65 of a
# raw loopback copy where 8 MiB reached 0.45 (bench/upload_throughput.py).
UPLOAD_CHUNK_BYTES = env_bytes("UPLOAD_CHUNK_BYTES", default=32 << 20)
# Open (unfinished) uploads one person may have, and the bytes they may declare in all; an
# upload or chunk that would leave less than STORE_MIN_FREE_BYTES free on the store's disk is
# refused with 507. Uploads untouched for UPLOAD_ABANDONED_HOURS are removed (beat, hourly).
UPLOADS_OPEN_PER_USER = env_int("UPLOADS_OPEN_PER_USER", default=8, minimum=1)
UPLOAD_OPEN_BYTES_PER_USER = env_bytes("UPLOAD_OPEN_BYTES_PER_USER", default=16 << 30)
STORE_MIN_FREE_BYTES = env_bytes("STORE_MIN_FREE_BYTES", default=1 << 30)
UPLOAD_ABANDONED_HOURS = env_int("UPLOAD_ABANDONED_HOURS", default=24, minimum=1)
# Threads that run Django for HTTP requests in the web process (each keeps a DB connection).
WEB_THREADS = env_int("WEB_THREADS", default=16, minimum=1)
# Of those, how many may be held at once by slow requests (infer, switches with ?wait=true);
# 0 means all but four, which stay for pages, reads and health checks.
WEB_SLOW_REQUESTS = env_int("WEB_SLOW_REQUESTS", default=0, minimum=0)
# A switch with ?wait=true waits at most this long for its job, then answers 202.
SERVE_WAIT_SECONDS = env_int("SERVE_WAIT_SECONDS", default=210, minimum=1)

# --- Try it: test inference and performance sweeps ---------------------------------------------
# One infer request body (JSON with its tensors or a base64 photo); larger ones get a 413.
INFER_MAX_REQUEST_BYTES = env_bytes("INFER_MAX_REQUEST_BYTES", default=16 << 20)
# All input tensors of one request together, in elements; and a photo's pixels before decoding.
INFER_MAX_ELEMENTS = env_int("INFER_MAX_ELEMENTS", default=4_000_000, minimum=1)
INFER_MAX_IMAGE_PIXELS = env_int("INFER_MAX_IMAGE_PIXELS", default=40_000_000, minimum=1)
INFER_TIMEOUT_SECONDS = env_int("INFER_TIMEOUT_SECONDS", default=30, minimum=1)
# Slow requests (inference, waiting switches) one person may have running at once.
INFER_CONCURRENCY_PER_USER = env_int("INFER_CONCURRENCY_PER_USER", default=4, minimum=1)
# Memory one photo may take while it is decoded and converted (checked from its header).
INFER_IMAGE_MEMORY_BYTES = env_bytes("INFER_IMAGE_MEMORY_BYTES", default=256 << 20)
# Requests per user per minute on the infer endpoint; 0 turns the limit off.
INFER_RATE_PER_MINUTE = env_int("INFER_RATE_PER_MINUTE", default=600, minimum=0)
# Saved Try-it examples (each checked like an infer request): how many per model and per
# person, and the bytes all of one model's examples may take together.
TRY_EXAMPLES_PER_MODEL = env_int("TRY_EXAMPLES_PER_MODEL", default=50, minimum=1)
TRY_EXAMPLES_PER_USER = env_int("TRY_EXAMPLES_PER_USER", default=100, minimum=1)
TRY_EXAMPLES_BYTES_PER_MODEL = env_bytes("TRY_EXAMPLES_BYTES_PER_MODEL", default=64 << 20)
# Sweeps: the highest concurrency a person may ask for, and the time at each level.
SWEEP_MAX_CONCURRENCY = env_int("SWEEP_MAX_CONCURRENCY", default=16, minimum=1)
SWEEP_STEP_SECONDS = env_int("SWEEP_STEP_SECONDS", default=3, minimum=1)
# Finding the best config (webapp/registry/performance/tuning.py): trials share the host with what
# serves, so their load and length are bounded.
TUNE_MAX_BUDGET_S = env_int("TUNE_MAX_BUDGET_S", default=1800, minimum=30)
TUNE_MAX_CONCURRENCY = env_int("TUNE_MAX_CONCURRENCY", default=4, minimum=1)
TUNE_STEP_SECONDS = env_int("TUNE_STEP_SECONDS", default=2, minimum=1)
TUNE_MAX_INSTANCES = env_int("TUNE_MAX_INSTANCES", default=4, minimum=1)

# Any other request body (forms, JSON); larger ones get a 413 before they are read.
REQUEST_MAX_BYTES = env_bytes("REQUEST_MAX_BYTES", default=1 << 20)
# Django's own request limits stay small: model files arrive in chunks, never in one body; an
# infer request may carry a photo, and the infer view enforces its own cap first.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(10 << 20, INFER_MAX_REQUEST_BYTES)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 << 20

# --- Ascend toolchain (absent on most machines; the UI says "needs CANN") ----------------------
ATC_PATH = env_str("ATC_PATH")
ASCEND_TOOLKIT_HOME = env_str("ASCEND_TOOLKIT_HOME")
# Where CANN and the driver are installed (default /usr/local/Ascend); the worker's host report
# and ATC's discovery read it from the environment (model_store.host_report).
ASCEND_ROOT = env_str("ASCEND_ROOT")
# The python3 ATC's operator compiler runs (CANN's Python and packages, not the hub's
# virtualenv); the worker's ATC reads it from its environment (model_store.compile.atc).
ATC_PYTHON = env_str("ATC_PYTHON")

# --- Redis: Celery broker and Channels layer ---------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "prefix": "hub:channels"},
        }
    }
else:
    # Without Redis (a bare `manage.py` call, unit tests) pushes stay in-process.
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Counters that need no durability: the per-user inference limits, in-flight slow requests
# and the access epoch (webapp/access_epoch.py), written on every inference call. The broker's
# Redis must survive a restart with its queue (the embedded one fsyncs every write, ~0.3 ms on
# the development VM's disk); these counters may be lost, so `make run` keeps them in a second
# Redis without an append-only file. Unset: REDIS_URL.
LIMITS_REDIS_URL = env_str("LIMITS_REDIS_URL") or REDIS_URL

CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = REDIS_URL or "cache+memory://"
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", default=3600, minimum=10)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
SERVER_STATE_PUSH_SECONDS = env_int("SERVER_STATE_PUSH_SECONDS", default=5, minimum=1)
# How often a worker probes its host (npu-smi, CANN, ATC) and records the report that the
# Server page, the devices API and the targets' availability show (webapp/nodes/host_reports.py).
HOST_PROBE_SECONDS = env_int("HOST_PROBE_SECONDS", default=30, minimum=5)
# How long the serving Triton's own facts (its CANN, pyACL, backends; asked from inside it) are
# kept before an Ascend host's report asks again (docs/ascend.md#the-serving-side).
SERVING_FACTS_SECONDS = env_int("SERVING_FACTS_SECONDS", default=600, minimum=30)
# GET /metrics (Prometheus) without a token: for scrapers on a trusted network only.
METRICS_PUBLIC = env_bool("METRICS_PUBLIC", default=False)
# How often beat scrapes Triton's Prometheus endpoint into the metrics time series.
METRICS_SCRAPE_SECONDS = env_int("METRICS_SCRAPE_SECONDS", default=10, minimum=1)

# --- Live updates (/ws/live/) and job logs ---------------------------------------------------
# Topics one websocket connection may follow (each is a channel-layer group membership; pages
# use a handful), and the largest message a browser may send it.
LIVE_MAX_TOPICS = env_int("LIVE_MAX_TOPICS", default=32, minimum=1)
LIVE_MAX_MESSAGE_BYTES = env_bytes("LIVE_MAX_MESSAGE_BYTES", default=8 << 10)
# Log lines of one job kept in the database and pushed live; every line also goes to the job's
# full log file in the store (logs/<job>.log), which the job page and the API offer.
JOB_LOG_MAX_LINES = env_int("JOB_LOG_MAX_LINES", default=2000, minimum=1)

# --- Logging ------------------------------------------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO").upper()},
    "loggers": {"django.channels.server": {"level": "WARNING"}},
}
CSRF_FAILURE_VIEW = "webapp.api.views.csrf_failure"

RECONCILE_SECONDS = env_int("RECONCILE_SECONDS", default=60, minimum=5)
SWITCH_LOCK_TTL_SECONDS = env_int("SWITCH_LOCK_TTL_SECONDS", default=720, minimum=2)
CELERY_BEAT_SCHEDULE = {
    "reconcile": {
        "task": "workers.tasks.serve.reconcile",
        "schedule": float(RECONCILE_SECONDS),
        "options": {"expires": float(RECONCILE_SECONDS)},
    },
    "push-server-state": {
        "task": "workers.tasks.server.push_server_state",
        "schedule": float(SERVER_STATE_PUSH_SECONDS),
        # A state push older than one period is useless: never let them pile up in the queue.
        "options": {"expires": float(SERVER_STATE_PUSH_SECONDS)},
    },
    "probe-host": {
        "task": "workers.tasks.server.probe_host",
        "schedule": float(HOST_PROBE_SECONDS),
        "options": {"expires": float(HOST_PROBE_SECONDS)},
    },
    # What the web processes spooled of sampled requests becomes captures (files and rows).
    "ingest-captures": {
        "task": "workers.tasks.capture.ingest",
        "schedule": 3.0,
        "options": {"expires": 3.0},
    },
    # Captures older than their model's retention_hours (webapp/registry/capture/).
    "expire-captures": {
        "task": "workers.tasks.capture.expire",
        "schedule": 600.0,
        "options": {"expires": 600.0},
    },
    "remove-abandoned-uploads": {
        "task": "workers.tasks.uploads.remove_abandoned",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
    # Only does anything with LDAP_SERVER_URI set (webapp/sso/recheck.py).
    "recheck-directory": {
        "task": "workers.tasks.sso.recheck_directory",
        "schedule": float(LDAP_RECHECK_SECONDS),
        "options": {"expires": float(LDAP_RECHECK_SECONDS)},
    },
    "scrape-metrics": {
        "task": "workers.tasks.metrics.scrape",
        "schedule": float(METRICS_SCRAPE_SECONDS),
        # A missed scrape costs nothing (the next one diffs against the last stored), so a
        # late one is dropped rather than run twice in a row.
        "options": {"expires": float(METRICS_SCRAPE_SECONDS)},
    },
}
