"""Advice from a model's numbers, as an experienced Triton operator reads them.

Pure rules over :class:`~model_store.runtime.series.Point` sums and the serving config:

* requests that wait much longer in the queue than they compute mean the model is near
  capacity: more instances, or (dynamic) batching so one execution serves several requests;
  the batcher's own deliberate wait (``max_queue_delay_microseconds``) is not counted as such;
* dynamic batching that never batches: busy but batches of ~1 -> the delay is too short for
  requests to meet; idle and the queue time is mostly that delay -> it only adds latency;
* failures, with their rate and share;
* models whose backend reports no statistics to Triton (``npu_ge``: the GE backend,
  docs/ge-backend.md#statistics-reload-and-unload): what is shown is the hub's own calls;
* no requests at all.

Every message is a :func:`~model_store.text.say` sentence (a ``str`` holding the English that
also keeps its template), so the Metrics tab and the API can say it in the reader's language;
``level`` and ``code`` never change with the language.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from model_store.runtime.series import Point
from model_store.targets import get_target
from model_store.text import Message, Said, as_json, say

__all__ = ["Advice", "ServingConfig", "advise"]

#: Queue time (beyond the batcher's own delay) above this multiple of compute time = near capacity.
QUEUE_FACTOR = 2.0
#: ... and above this many ms, so that microsecond noise on an idle model says nothing.
MIN_QUEUE_EXCESS_MS = 0.5
#: Successful requests needed in the recent window before latency rules speak.
MIN_RECENT_SUCCESS = 20
#: An average batch below this counts as "not batching".
UNBATCHED = 1.3
#: Instances busy at least this share of the time count as "busy".
BUSY = 0.5


@dataclass(frozen=True)
class Advice:
    level: str  # "ok" | "info" | "warning"
    code: str
    message: Said  # a Message: the English, with its template for translation

    def to_dict(self) -> dict[str, Any]:
        """``level``, ``code`` and ``message`` as JSON (a message as its template and values,
        :func:`~model_store.text.as_json`), so the web layer can still translate it."""
        return {"level": self.level, "code": self.code, "message": as_json(self.message)}


@dataclass(frozen=True)
class ServingConfig:
    """What of the serving version's config.pbtxt the rules need."""

    max_batch_size: int = 0
    instance_count: int = 1
    dynamic_batching: bool = False
    max_queue_delay_us: int = 0


def _ms(value: float) -> str:
    return f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"


def _rate(value: float) -> str:
    return f"{value:.2f}/s" if value < 10 else f"{value:.1f}/s"


def _failures(total: Point, range_label: Said, client_side: bool) -> Advice | None:
    failed = total.client_failures if client_side else total.failures
    sent = total.client_requests if client_side else total.requests
    if failed <= 0:
        return None
    share = failed / sent * 100 if sent else 100.0
    share_text = f"{share:.1f}%" if share >= 0.1 else f"{share:.2g}%"
    rate = failed / total.seconds if total.seconds > 0 else 0.0
    values = {
        "failed": f"{failed:,}",
        "range": range_label,
        "share": share_text,
        "sent": f"{sent:,}",
        "rate": _rate(rate),
    }
    if client_side:
        message = say(
            "%(failed)s requests of the dashboard's own calls failed in %(range)s (%(share)s "
            "of %(sent)s, %(rate)s). Triton's log and the Server page say why; Try it shows "
            "the error of a single request.",
            **values,
        )
    else:
        message = say(
            "%(failed)s requests failed in %(range)s (%(share)s of %(sent)s, %(rate)s). "
            "Triton's log and the Server page say why; Try it shows the error of a single "
            "request.",
            **values,
        )
    return Advice("warning", "failures", message)


def _capacity(recent: Point, config: ServingConfig) -> Advice | None:
    queue_ms = recent.queue_us / recent.success / 1000
    compute_ms = recent.compute_us / recent.success / 1000
    delay_ms = config.max_queue_delay_us / 1000 if config.dynamic_batching else 0.0
    excess = queue_ms - delay_ms
    if excess <= QUEUE_FACTOR * compute_ms or excess < MIN_QUEUE_EXCESS_MS:
        return None
    remedy: Message
    if config.dynamic_batching and config.max_batch_size > 0:
        remedy = say(
            "raise max_batch_size (now %(max_batch)s) so one execution takes more of the queue",
            max_batch=config.max_batch_size,
        )
    elif config.max_batch_size > 0:
        remedy = say("enable dynamic batching so one execution serves several requests")
    else:
        remedy = say(
            "give the model a batch dimension (max_batch_size) and enable dynamic batching"
        )
    delay_note: Message | str = (
        say(" (not counting the batcher's own wait of up to %(delay)s)", delay=_ms(delay_ms))
        if delay_ms
        else ""
    )
    pending: Message | str = (
        say("; up to %(pending)s requests were waiting", pending=f"{recent.pending:.0f}")
        if recent.pending
        else ""
    )
    return Advice(
        "warning",
        "near_capacity",
        say(
            "Requests wait %(queue)s in the queue%(delay_note)s against %(compute)s of compute "
            "over the last 5 minutes%(pending)s: the model is near capacity. Add instances "
            "(instance_group count, now %(instances)s), or %(remedy)s.",
            queue=_ms(queue_ms),
            delay_note=delay_note,
            compute=_ms(compute_ms),
            pending=pending,
            instances=config.instance_count,
            remedy=remedy,
        ),
    )


def _batching(recent: Point, config: ServingConfig) -> Advice | None:
    if not config.dynamic_batching or recent.executions <= 0:
        return None
    batch = recent.inferences / recent.executions
    if batch >= UNBATCHED:
        return None
    busy = recent.busy_fraction(config.instance_count) or 0.0
    delay_us = config.max_queue_delay_us
    queue_ms = recent.queue_us / recent.success / 1000
    if busy >= BUSY or (recent.pending or 0) >= 2:
        return Advice(
            "info",
            "batching_idle",
            say(
                "Dynamic batching is on, yet executions average %(batch)s requests while the "
                "instances are busy %(busy)s%% of the time: requests rarely meet in the queue. "
                "A longer max_queue_delay_microseconds (now %(delay_us)s) lets the batcher "
                "gather more per execution, trading a little latency for throughput; with a "
                "single client that waits for each answer, no delay helps.",
                batch=f"{batch:.2f}",
                busy=f"{busy * 100:.0f}",
                delay_us=delay_us,
            ),
        )
    if delay_us > 0 and queue_ms >= 0.5 * delay_us / 1000:
        return Advice(
            "info",
            "batching_delay",
            say(
                "At this load most of the queue time (%(queue)s) is the batcher waiting up to "
                "max_queue_delay_microseconds (%(delay_us)s µs) for company that does not come "
                "(batches average %(batch)s). Lower it if latency matters more than throughput "
                "at peak.",
                queue=_ms(queue_ms),
                delay_us=delay_us,
                batch=f"{batch:.2f}",
            ),
        )
    return None


def _headroom(recent: Point, config: ServingConfig) -> Advice:
    queue_ms = recent.queue_us / recent.success / 1000
    compute_ms = recent.compute_us / recent.success / 1000
    busy = recent.busy_fraction(config.instance_count)
    if busy is None:
        message = say(
            "Queue %(queue)s against compute %(compute)s over the last 5 minutes: there is "
            "headroom at this load.",
            queue=_ms(queue_ms),
            compute=_ms(compute_ms),
        )
    else:
        message = say(
            "Queue %(queue)s against compute %(compute)s over the last 5 minutes, instances busy "
            "about %(busy)s%% of the time: there is headroom at this load.",
            queue=_ms(queue_ms),
            compute=_ms(compute_ms),
            busy=f"{busy * 100:.0f}",
        )
    return Advice("ok", "headroom", message)


def advise(
    *,
    target: str,
    total: Point | None,
    recent: Point | None,
    config: ServingConfig | None,
    range_label: Said,
) -> list[Advice]:
    """What to tell the operator about one model.

    ``total`` sums the whole range shown, ``recent`` the last 5 minutes (all versions merged;
    None when nothing was stored); ``config`` is the serving version's, None if unknown.
    """
    config = config or ServingConfig()
    advice: list[Advice] = []
    no_statistics = not get_target(target).reports_statistics
    if no_statistics:
        advice.append(
            Advice(
                "info",
                "no_statistics",
                say(
                    "The %(target)s backend reports no statistics to Triton, so Triton's "
                    "request counts and latency split stay at zero for this model. The numbers "
                    "here are the dashboard's own measurements of its calls (Try it and "
                    "performance sweeps), not all of the model's traffic.",
                    target=target,
                ),
            )
        )
    requests = 0 if total is None else total.requests
    client = 0 if total is None else total.client_requests
    if total is None or (requests == 0 and client == 0):
        advice.append(
            Advice("info", "no_traffic", say("No requests in %(range)s.", range=range_label))
        )
        return advice
    if no_statistics and client == 0:
        advice.append(
            Advice(
                "info",
                "no_client_calls",
                say(
                    "No dashboard calls in %(range)s: send one from Try it, or run a "
                    "performance sweep, to measure this model.",
                    range=range_label,
                ),
            )
        )
    failures = _failures(total, range_label, client_side=no_statistics)
    if failures is not None:
        advice.append(failures)
    if no_statistics:
        return advice
    if recent is None or recent.success < MIN_RECENT_SUCCESS:
        seen = 0 if recent is None else recent.success
        advice.append(
            Advice(
                "info",
                "few_requests",
                say(
                    "%(seen)s successful requests in the last 5 minutes: too few to read the "
                    "latency split (the queue and capacity advice needs %(needed)s).",
                    seen=seen,
                    needed=MIN_RECENT_SUCCESS,
                ),
            )
        )
        return advice
    found = [a for a in (_capacity(recent, config), _batching(recent, config)) if a is not None]
    if not any(a.level == "warning" for a in found):
        found.append(_headroom(recent, config))
    return advice + found
