"""The capture writer: requests handed over by the inference paths, written off their path.

Every path that answers an inference (the ``/v2`` fast path, Django's ``/v2``, the infer API)
asks :func:`sampled` whether to keep this call, and, if so, hands it to :func:`offer`. That
only puts it on a bounded queue: when the queue is full the item is dropped and counted, and
the request never waits. One thread per web process takes items off the queue and spools them
as they are (:mod:`model_store.capture.spool`): a file write, so that the web process, whose
event loop shares the interpreter with this thread, spends next to nothing on a capture.

A worker ingests the spool (:func:`ingest`, the beat task ``workers.tasks.capture.ingest``):
it reads the tensors out of the bodies, writes the ``.npz``, adds the rows, and keeps each
model within its ``max_items`` and ``max_bytes`` by removing its oldest captures.

When the disk would fill (:class:`model_store.capture.files.DiskFull`), capturing stops for
that model (``stopped_reason``), which the model page and the API show; serving goes on.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import Count, F, Sum
from django.utils import timezone

from model_store.capture import files as capture_files
from model_store.capture import spool as capture_spool
from model_store.capture.v2_body import BodyError, tensors
from model_store.text import say
from webapp.registry.capture.models import Capture, CaptureCounters, CapturePolicy
from webapp.registry.catalogue.models import Model
from webapp.registry.jobs.record import record_event

log = logging.getLogger(__name__)

#: At most this many captured requests wait for the writer (each holds its bodies in memory).
QUEUE_ITEMS = 256
#: The counters are written to the database at most this often.
COUNTS_FLUSH_SECONDS = 2.0
#: How long a model's capture rate is kept in memory by the Django paths.
RATE_MAX_AGE_SECONDS = 2.0


@dataclass
class Item:
    """One answered request to keep: raw v2 bodies (the gateways) or tensors (the infer API)."""

    model: str
    version: int
    caller: str
    latency_ms: float
    source: str  # "v2" or "api"
    when: float = field(default_factory=time.time)
    request: bytes | None = None
    request_header_length: int | None = None
    answer: bytes | None = None
    answer_header_length: int | None = None
    inputs: dict[str, np.ndarray] | None = None
    outputs: dict[str, np.ndarray] | None = None


def sampled(rate: float) -> bool:
    """Keep this call, at ``rate`` percent?"""
    return rate >= 100 or (rate > 0 and random.random() * 100 < rate)  # noqa: S311 (sampling)


def spool() -> capture_spool.Spool:
    return capture_spool.Spool(
        settings.MODEL_STORE_ROOT / "captures" / ".spool",
        min_free=settings.CAPTURE_MIN_FREE_BYTES,
    )


def store() -> capture_files.CaptureFiles:
    return capture_files.CaptureFiles(
        settings.MODEL_STORE_ROOT / "captures", min_free=settings.CAPTURE_MIN_FREE_BYTES
    )


# -- the Django paths' view of the policies ---------------------------------------------------
_rates: dict[str, tuple[float, float]] = {}


def rate_for(model: str) -> float:
    """The model's capture rate in percent (0: off), read at most every couple of seconds."""
    now = time.monotonic()
    kept = _rates.get(model)
    if kept is not None and now - kept[1] < RATE_MAX_AGE_SECONDS:
        return kept[0]
    policy = CapturePolicy.objects.filter(model__name=model).first()
    rate = policy.sample_rate if policy is not None and policy.active else 0.0
    _rates[model] = (rate, now)
    return rate


def forget_rates() -> None:
    _rates.clear()


# -- the queue and its writer -------------------------------------------------------------
class Recorder:
    def __init__(self, maxsize: int = QUEUE_ITEMS) -> None:
        self.queue: queue.Queue[Item] = queue.Queue(maxsize=maxsize)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._dropped: Counter[str] = Counter()  # model -> dropped because the queue was full
        self._spooler: capture_spool.Spool | None = None

    def offer(self, item: Item) -> bool:
        """Queue ``item`` for writing; False (and counted) when the queue is full."""
        self._start()
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            with self._lock:
                self._dropped[item.model] += 1
            return False
        return True

    def _start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="capture-writer", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        counts: Counter[tuple[str, str]] = Counter()
        flushed = time.monotonic()
        while True:
            try:
                item = self.queue.get(timeout=COUNTS_FLUSH_SECONDS)
            except queue.Empty:
                item = None
            if item is not None:
                try:
                    outcome = _spool_item(self._spool(), item)
                    if outcome:
                        counts[(item.model, outcome)] += 1
                except Exception:
                    log.exception("capture of %s could not be spooled", item.model)
                finally:
                    self.queue.task_done()
            if time.monotonic() - flushed >= COUNTS_FLUSH_SECONDS or self.queue.empty():
                with self._lock:
                    dropped, self._dropped = self._dropped, Counter()
                for model, n in dropped.items():
                    counts[(model, "dropped_queue_full")] += n
                if counts:
                    try:
                        _add_counts(counts)
                    except Exception:
                        log.exception("capture counters could not be written")
                    counts = Counter()
                flushed = time.monotonic()

    def _spool(self) -> capture_spool.Spool:
        # One per thread and setting: it keeps its count of spooled files between calls.
        root = settings.MODEL_STORE_ROOT / "captures" / ".spool"
        if self._spooler is None or self._spooler.root != root:
            self._spooler = spool()
        self._spooler.min_free = settings.CAPTURE_MIN_FREE_BYTES
        return self._spooler

    def drain(self, timeout: float = 10.0) -> None:
        """Wait until every queued item is spooled, then ingest the spool here (tests)."""
        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.05)  # the counters follow the last item within one loop turn
        with self._lock:
            dropped, self._dropped = self._dropped, Counter()
        if dropped:
            _add_counts(Counter({(m, "dropped_queue_full"): n for m, n in dropped.items()}))
        ingest()


RECORDER = Recorder()


def offer(item: Item) -> bool:
    return RECORDER.offer(item)


def _add_counts(counts: Counter[tuple[str, str]]) -> None:
    close_old_connections()
    by_model: dict[str, dict[str, int]] = {}
    for (model, what), n in counts.items():
        if what != "skipped":
            by_model.setdefault(model, {})[what] = n
    for name, fields in by_model.items():
        model_id = Model.objects.filter(name=name).values_list("id", flat=True).first()
        if model_id is None:
            continue
        CaptureCounters.objects.get_or_create(model_id=model_id)
        CaptureCounters.objects.filter(model_id=model_id).update(
            **{what: F(what) + n for what, n in fields.items()}
        )


def _spool_item(to: capture_spool.Spool, item: Item) -> str:
    """Spool one item (the web process's whole share of a capture); a counter's name when it
    was not spooled, else ""."""
    facts: dict[str, Any] = {
        "model": item.model, "version": item.version, "caller": item.caller,
        "latency_ms": item.latency_ms, "source": item.source, "when": item.when,
    }  # fmt: skip
    if item.inputs is not None:
        facts["kind"] = "npz"
        parts = [capture_files.encode(item.inputs, item.outputs or {})]
    else:
        facts |= {"kind": "bodies", "request_header_length": item.request_header_length,
                  "answer_header_length": item.answer_header_length}  # fmt: skip
        parts = [item.request or b"", item.answer or b""]
    try:
        to.put(facts, parts)
    except capture_spool.SpoolFull:
        return "dropped_queue_full"
    except capture_files.DiskFull as exc:
        close_old_connections()
        _stop_model(item.model, "disk_full", str(exc))
        return "dropped_disk_full"
    except OSError as exc:
        close_old_connections()
        _stop_model(item.model, "write_failed", str(exc))
        return "dropped_disk_full"
    return ""


def _item_from_spool(facts: dict[str, Any], parts: list[bytes]) -> Item:
    item = Item(str(facts["model"]), int(facts["version"]), str(facts.get("caller", "")),
                float(facts.get("latency_ms", 0.0)), str(facts.get("source", "v2")),
                when=float(facts["when"]))  # fmt: skip
    if facts.get("kind") == "npz":
        item.inputs, item.outputs = capture_files.decode(parts[0])
    else:
        item.request, item.answer = parts[0], parts[1]
        item.request_header_length = facts.get("request_header_length")
        item.answer_header_length = facts.get("answer_header_length")
    return item


def ingest(max_items: int = 2000, max_seconds: float = 30.0) -> dict[str, int]:
    """Take spooled requests in (oldest first): their tensors, files and rows, then each
    model's caps. Counts of what became of them."""
    close_old_connections()
    started = time.monotonic()
    source = spool()
    source.forget_stale_claims()
    counts: Counter[tuple[str, str]] = Counter()
    policies: dict[str, CapturePolicy | None] = {}
    done = 0
    while done < max_items and time.monotonic() - started < max_seconds:
        batch = source.oldest(min(200, max_items - done))
        if not batch:
            break
        rows: list[Capture] = []
        for spooled in batch:
            path = source.claim(spooled)
            if path is None:
                continue  # another worker took it
            try:
                facts, parts = capture_spool.read(path)
                item = _item_from_spool(facts, parts)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("capture spool: %s is not readable (%s); removed", path.name, exc)
            else:
                outcome = write(item, policies=policies, trim_after=False, rows=rows)
                counts[(item.model, outcome)] += 1
            path.unlink(missing_ok=True)
            done += 1
        Capture.objects.bulk_create(rows)
    for policy in {p.pk: p for p in policies.values() if p is not None}.values():
        trimmed = trim(policy)
        if trimmed:
            counts[(policy.model.name, "trimmed")] += trimmed
    if counts:
        _add_counts(counts)
    totals: Counter[str] = Counter()
    for (_, what), n in counts.items():
        totals[what] += n
    return dict(totals)


def write(
    item: Item,
    *,
    policies: dict[str, CapturePolicy | None] | None = None,
    trim_after: bool = True,
    rows: list[Capture] | None = None,
) -> str:
    """Write one item: its tensors' file and its row, and the caps unless ``trim_after`` is
    False (the caller trims once for many); what became of it (a counter's name, or
    ``skipped``). ``policies``: the policies read so far by model, kept between items;
    ``rows``: where to put the new row instead of saving it (the caller saves many at once)."""
    if policies is not None and item.model in policies:
        policy = policies[item.model]
    else:
        policy = (
            CapturePolicy.objects.select_related("model").filter(model__name=item.model).first()
        )
        if policies is not None:
            policies[item.model] = policy
    if policy is None or not policy.active:
        return "skipped"  # turned off, or stopped, since the call was sampled
    try:
        inputs, outputs = _tensors(item)
    except BodyError as exc:
        log.info("capture of %s: the request could not be read (%s)", item.model, exc)
        return "dropped_unreadable"
    data = capture_files.encode(inputs, outputs)
    files = store()
    try:
        name = files.write(item.model, data)
    except capture_files.DiskFull as exc:
        _stop(policy, "disk_full", str(exc))
        policy.stopped_reason = "disk_full"  # the rest of this batch is skipped
        return "dropped_disk_full"
    except OSError as exc:
        log.warning("capture of %s could not be written: %s", item.model, exc)
        _stop(policy, "write_failed", str(exc))
        policy.stopped_reason = "write_failed"
        return "dropped_disk_full"
    row = Capture(
        model=policy.model,
        version=item.version,
        created=datetime.fromtimestamp(item.when, UTC),
        caller=item.caller[:150],
        latency_ms=round(item.latency_ms, 3),
        source=item.source,
        inputs=_described(inputs),
        outputs=_described(outputs),
        file=name,
        size=len(data),
    )
    if rows is not None:
        rows.append(row)  # the caller adds them in one statement
    else:
        row.save()
    if trim_after:
        trimmed = trim(policy)
        if trimmed:
            _add_counts(Counter({(policy.model.name, "trimmed"): trimmed}))
    return "written"


def _tensors(item: Item) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    if item.inputs is not None:
        return item.inputs, item.outputs or {}
    if item.request is None or item.answer is None:
        raise BodyError("no bodies")
    inputs = tensors(item.request, item.request_header_length, "inputs")
    outputs = tensors(item.answer, item.answer_header_length, "outputs")
    return inputs, outputs


def _described(arrays: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    return [
        {"name": name, "datatype": str(array.dtype), "shape": list(array.shape)}
        for name, array in arrays.items()
    ]


def trim(policy: CapturePolicy) -> int:
    """Remove the model's oldest captures beyond ``max_items`` and ``max_bytes``; how many."""
    captures = Capture.objects.filter(model_id=policy.model_id)
    total = captures.aggregate(n=Count("id"), size=Sum("size"))
    count, size = total["n"] or 0, total["size"] or 0
    if count <= policy.max_items and size <= policy.max_bytes:
        return 0
    doomed: list[tuple[int, str]] = []
    for pk, name, item_size in (
        captures.order_by("created", "id").values_list("pk", "file", "size").iterator()
    ):
        if count <= policy.max_items and size <= policy.max_bytes:
            break
        doomed.append((pk, name))
        count -= 1
        size -= item_size
    return remove(policy.model.name, doomed)


def remove(model: str, doomed: list[tuple[int, str]]) -> int:
    """Delete these captures' rows, then their files."""
    if not doomed:
        return 0
    Capture.objects.filter(pk__in=[pk for pk, _ in doomed]).delete()
    store().delete(model, [name for _, name in doomed])
    return len(doomed)


def _stop_model(model: str, reason: str, detail: str) -> None:
    policy = CapturePolicy.objects.select_related("model").filter(model__name=model).first()
    if policy is not None:
        _stop(policy, reason, detail)


def _stop(policy: CapturePolicy, reason: str, detail: str) -> None:
    with transaction.atomic():
        updated = CapturePolicy.objects.filter(pk=policy.pk, stopped_reason="").update(
            stopped_reason=reason, stopped_at=timezone.now()
        )
    forget_rates()
    if updated:
        log.warning("capture of %s stopped (%s): %s", policy.model.name, reason, detail)
        record_event(
            "capture.stopped",
            say(
                "Capture of %(model)s stopped: the disk would fill (%(detail)s). The model "
                "keeps serving; free space, then turn capture on again.",
                model=policy.model.name,
                detail=detail[:200],
            ),
            model=policy.model,
            data={"reason": reason},
        )
