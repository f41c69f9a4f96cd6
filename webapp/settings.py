"""Django settings for Triton Model Hub, read from the environment.

Every variable is listed in ``.env.example`` and in the README. A fresh checkout with no
environment runs on SQLite under ``var/``; ``make run`` adds a real Redis and Triton and passes
their addresses to its children through the same variables.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from webapp.env import (
    database_from_url,
    env_bool,
    env_bytes,
    env_hostport,
    env_int,
    env_list,
    env_secret,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("HUB_VAR_DIR", str(BASE_DIR / "var"))).resolve()

DEBUG = env_bool("DEBUG", default=False)


def _default_secret_key() -> str:
    # The embedded default keeps a generated key in var/ so sessions survive restarts without
    # anyone having to invent a secret; production sets SECRET_KEY (or SECRET_KEY_FILE).
    path = VAR_DIR / "secret_key"
    if path.exists():
        return path.read_text().strip()
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    path.write_text(key)
    path.chmod(0o600)
    return key


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
    "webapp.accounts",
    "webapp.registry",
    "webapp.ops",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "webapp.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After AuthenticationMiddleware (which would overwrite request.user) and still before
    # CsrfViewMiddleware.process_view, which reads the exemption it sets.
    "webapp.accounts.auth.TokenAuthenticationMiddleware",
    "webapp.accounts.auth.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "webapp.urls"
ASGI_APPLICATION = "webapp.asgi.application"
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
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "models"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = False
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
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", default=False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
X_FRAME_OPTIONS = "DENY"

# --- Model store and Triton -------------------------------------------------------------------
MODEL_STORE_ROOT = Path(env_str("MODEL_STORE_ROOT", str(VAR_DIR / "store"))).resolve()
TRITON_URL = env_hostport("TRITON_URL", default="127.0.0.1:8000")
TRITON_GRPC_URL = env_hostport("TRITON_GRPC_URL", default="127.0.0.1:8001")
TRITON_METRICS_URL = env_hostport("TRITON_METRICS_URL", default="127.0.0.1:8002")
TRITON_TIMEOUT_SECONDS = env_int("TRITON_TIMEOUT_SECONDS", default=10, minimum=1)

# --- Uploads ------------------------------------------------------------------------------------
UPLOAD_MAX_BYTES = env_bytes("UPLOAD_MAX_BYTES", default=4 << 30)
# Large chunks amortise the per-request checks (auth, role, ownership): 32 MiB reached 0.65 of a
# raw loopback copy where 8 MiB reached 0.45 (bench/upload_throughput.py).
UPLOAD_CHUNK_BYTES = env_bytes("UPLOAD_CHUNK_BYTES", default=32 << 20)
# Threads that run Django for HTTP requests in the web process (each keeps a DB connection).
WEB_THREADS = env_int("WEB_THREADS", default=16, minimum=1)

# --- Try it: test inference and performance sweeps ---------------------------------------------
# One infer request body (JSON with its tensors or a base64 photo); larger ones get a 413.
INFER_MAX_REQUEST_BYTES = env_bytes("INFER_MAX_REQUEST_BYTES", default=16 << 20)
# All input tensors of one request together, in elements; and a photo's pixels before decoding.
INFER_MAX_ELEMENTS = env_int("INFER_MAX_ELEMENTS", default=4_000_000, minimum=1)
INFER_MAX_IMAGE_PIXELS = env_int("INFER_MAX_IMAGE_PIXELS", default=40_000_000, minimum=1)
INFER_TIMEOUT_SECONDS = env_int("INFER_TIMEOUT_SECONDS", default=30, minimum=1)
# Requests per user per minute on the infer endpoint; 0 turns the limit off.
INFER_RATE_PER_MINUTE = env_int("INFER_RATE_PER_MINUTE", default=600, minimum=0)
# Sweeps: the highest concurrency a person may ask for, and the time at each level.
SWEEP_MAX_CONCURRENCY = env_int("SWEEP_MAX_CONCURRENCY", default=16, minimum=1)
SWEEP_STEP_SECONDS = env_int("SWEEP_STEP_SECONDS", default=3, minimum=1)

# Django's own request limits stay small: model files arrive in chunks, never in one body; an
# infer request may carry a photo, and the infer view enforces its own cap first.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(10 << 20, INFER_MAX_REQUEST_BYTES)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 << 20

# --- Ascend toolchain (absent on most machines; the UI says "needs CANN") ----------------------
ATC_PATH = env_str("ATC_PATH")
ASCEND_TOOLKIT_HOME = env_str("ASCEND_TOOLKIT_HOME")

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
# GET /metrics (Prometheus) without a token: for scrapers on a trusted network only.
METRICS_PUBLIC = env_bool("METRICS_PUBLIC", default=False)
# How often beat scrapes Triton's Prometheus endpoint into the metrics time series.
METRICS_SCRAPE_SECONDS = env_int("METRICS_SCRAPE_SECONDS", default=10, minimum=1)

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
    "scrape-metrics": {
        "task": "workers.tasks.metrics.scrape",
        "schedule": float(METRICS_SCRAPE_SECONDS),
        # A missed scrape costs nothing (the next one diffs against the last stored), so a
        # late one is dropped rather than run twice in a row.
        "options": {"expires": float(METRICS_SCRAPE_SECONDS)},
    },
}
