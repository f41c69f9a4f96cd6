"""Health probes for the hub containers, called by docker-compose.yml's `healthcheck:` entries.

    python /app/deploy/healthcheck.py web
    python /app/deploy/healthcheck.py beat [SCHEDULE_FILE]

Exit status 0 means healthy. The probes use only the standard library and redis-py and never
import Django, so they stay cheap enough to run every few seconds. (The worker's probe is
`celery inspect ping`, which asks the worker itself; it needs no helper.)
"""

from __future__ import annotations

import http.client
import os
import sys
from pathlib import Path

WEB_PORT = 8080
LIVE_PATH = "/api/v1/health/live"
TIMEOUT_SECONDS = 5.0


def probe_host(allowed_hosts: str) -> str:
    """A Host header that Django's ALLOWED_HOSTS accepts.

    The probe connects to 127.0.0.1, but production lists only its public names; a request
    carrying Host: 127.0.0.1 would get 400 and mark a healthy server unhealthy.
    """
    for entry in (item.strip() for item in allowed_hosts.split(",")):
        if not entry or entry == "*":
            continue
        if entry.startswith("."):
            # ".example.com" admits example.com itself and every subdomain.
            return entry[1:]
        return entry
    # Nothing usable listed: "*" accepts anything, and Django's defaults accept localhost.
    return "localhost"


def check_web() -> str | None:
    host = probe_host(os.environ.get("ALLOWED_HOSTS", ""))
    conn = http.client.HTTPConnection("127.0.0.1", WEB_PORT, timeout=TIMEOUT_SECONDS)
    try:
        # The forwarded-proto header keeps a SECURE_SSL_REDIRECT set-up (behind a TLS proxy)
        # from answering the probe with a redirect; Django only trusts it where told to.
        conn.request("GET", LIVE_PATH, headers={"Host": host, "X-Forwarded-Proto": "https"})
        response = conn.getresponse()
        response.read()
    except OSError as exc:
        return f"GET {LIVE_PATH} failed: {exc}"
    finally:
        conn.close()
    if response.status != 200:
        return f"GET {LIVE_PATH} (Host: {host}) returned {response.status}"
    return None


def _exists_with_any_suffix(path: Path) -> bool:
    try:
        return any(p.name.startswith(path.name) for p in path.parent.iterdir())
    except OSError:
        return False


def check_beat(schedule_file: str | None) -> str | None:
    """Beat has no ping of its own: check that its broker answers and that it has started.

    Beat creates its schedule database when it starts; with no broker it cannot send anything.
    """
    import redis  # only this probe needs it

    url = os.environ.get("REDIS_URL", "")
    if not url:
        return "REDIS_URL is not set"
    try:
        client = redis.Redis.from_url(
            url, socket_timeout=TIMEOUT_SECONDS, socket_connect_timeout=TIMEOUT_SECONDS
        )
        client.ping()
    except redis.RedisError as exc:
        return f"broker {url.split('@')[-1]} does not answer: {exc}"
    # The dbm backend may add a suffix (.db, .dat), hence the prefix match.
    if schedule_file and not _exists_with_any_suffix(Path(schedule_file)):
        return f"no beat schedule at {schedule_file}: beat has not started"
    return None


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] not in {"web", "beat"}:
        print(__doc__, file=sys.stderr)
        return 2
    schedule = argv[2] if len(argv) > 2 else None
    problem = check_web() if argv[1] == "web" else check_beat(schedule)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
