"""Chunked upload throughput and the web process's memory, against a raw loopback copy.

    .venv/bin/python bench/upload_throughput.py --size 1G

Starts a private stack (``python -m webapp.stack`` in a temp dir, free ports, everything
embedded) unless ``--url``/``--token`` name a running one; writes ``--size`` bytes of random
data once to ``big.onnx`` in the temp dir; then, in the same run:

* **raw** (the baseline): the same file sent over one TCP connection on 127.0.0.1 to a thread
  that writes it to a file in the same temp dir and fsyncs it at the end; the client reads the
  file in the server's chunk size, like the product client. Run before and after the product.
* **raw, fsync per chunk** (informational): the same, with an fsync after every chunk, as the
  product's ``write_chunk`` does. It separates the cost of durability from the rest.
* **raw, durable like the product**: what the product promises (an acknowledged chunk survives
  a crash), done the fastest plain way: writeback started as bytes are written, an fsync after
  every chunk, and each chunk acknowledged before the next is sent.
* **raw, durable like the product, with O_DIRECT** (informational): the same promise with
  direct writes, as the product now makes them (``model_store/uploads/direct_io.py``): what
  the product could reach at best on this disk. Skipped where the file system refuses it.
* **product**: ``POST /api/v1/uploads``, then one ``PUT`` per chunk (``Upload-Offset``, the
  server's ``chunk_bytes``) over one keep-alive ``http.client`` connection, then ``DELETE``.
  No version is created (the bytes are not a model).

Reports MB/s of each, the ratios product/raw and product/raw durable (goals >= 0.8), and the
web process's peak RSS growth over its pre-upload RSS, sampled every 100 ms (goal < 64 MiB).
Results: ``bench/results/upload_throughput.json``. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import mmap
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stack import (
    MIB,
    Api,
    ApiError,
    add_stack_arguments,
    listening_process,
    machine,
    median,
    parse_size,
    percentile,
    stack_from_args,
    table,
    tell,
    temp_workdir,
    write_results,
)

PIECE = 1024 * 1024  # what the server side copies at a time (model_store.uploads.PIECE_SIZE)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from model_store.uploads.chunks import (  # noqa: E402  (after the path above)
    WRITEBACK_BYTES,
    _start_writeback,
)
from model_store.uploads.direct_io import ALIGN as DIRECT_ALIGN  # noqa: E402
from model_store.uploads.direct_io import DIRECT_BUFFER_BYTES, open_direct  # noqa: E402

# --------------------------------------------------------------------------- the file


def make_file(path: Path, size: int) -> float:
    """``size`` random bytes, written once and fsynced; returns the seconds it took."""
    started = time.perf_counter()
    with path.open("wb") as out:
        left = size
        while left:
            piece = os.urandom(min(PIECE, left))
            out.write(piece)
            left -= len(piece)
        out.flush()
        os.fsync(out.fileno())
    return time.perf_counter() - started


# --------------------------------------------------------------------------- the baseline


def raw_loopback(source: Path, size: int, dest: Path, chunk: int, mode: str = "end") -> float:
    """Sends ``source`` over a loopback TCP connection to a thread that writes it to ``dest``.

    The client reads ``chunk`` bytes at a time (as the product client does) and ``sendall``s
    them; the receiver copies ``PIECE`` bytes at a time to the file and fsyncs at the end, then
    acknowledges with one byte. The time is from connecting until that acknowledgement: the
    bytes are on disk. ``mode``:

    * ``end``: one fsync at the end (the baseline);
    * ``chunk``: also an fsync after every ``chunk`` bytes (the cost of durability alone);
    * ``durable``: what the product promises, done the fastest plain way: writeback started
      every ``WRITEBACK_BYTES`` as written (``sync_file_range``, as ``write_chunk`` does), an
      fsync after every chunk, and each chunk acknowledged before the client sends the next, so
      that an acknowledged chunk survives a crash.
    """
    fsync_every = mode in ("chunk", "durable")
    ack_every = mode == "durable"
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    failure: list[BaseException] = []

    def receive() -> None:
        try:
            conn, _ = server.accept()
            with conn, dest.open("wb") as out:
                buf = bytearray(PIECE)
                view = memoryview(buf)
                received = since_sync = unsynced = 0
                while received < size:
                    wanted = min(PIECE, size - received)
                    if fsync_every:  # stop at the chunk's end, as the product's writer does
                        wanted = min(wanted, chunk - since_sync)
                    n = conn.recv_into(buf, wanted)
                    if not n:
                        break
                    out.write(view[:n])
                    received += n
                    since_sync += n
                    if ack_every and received - unsynced >= WRITEBACK_BYTES and _start_writeback:
                        out.flush()
                        _start_writeback(out.fileno(), unsynced, received - unsynced)
                        unsynced = received
                    if fsync_every and since_sync >= chunk:
                        out.flush()
                        os.fsync(out.fileno())
                        since_sync = 0
                        unsynced = received
                        if ack_every and received < size:
                            conn.sendall(b"k")
                out.flush()
                os.fsync(out.fileno())
                conn.sendall(b"K" if received == size else b"E")
        except BaseException as exc:  # reported by the caller
            failure.append(exc)

    thread = threading.Thread(target=receive, name="raw-receiver", daemon=True)
    thread.start()
    buf = bytearray(chunk)
    view = memoryview(buf)
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock, source.open("rb") as src:
        sent = 0
        while n := src.readinto(buf):
            sock.sendall(view[:n])
            sent += n
            if mode == "durable" and sent < size and sock.recv(1) != b"k":
                raise RuntimeError("the raw receiver did not acknowledge a chunk")
        ack = sock.recv(1)
    elapsed = time.perf_counter() - started
    thread.join(60)
    server.close()
    if failure:
        raise RuntimeError(f"the raw receiver failed: {failure[0]!r}")
    if ack != b"K" or dest.stat().st_size != size:
        raise RuntimeError(f"the raw copy is incomplete ({dest.stat().st_size} of {size} bytes)")
    dest.unlink()
    return elapsed


def raw_loopback_direct(source: Path, size: int, dest: Path, chunk: int) -> float | None:
    """:func:`raw_loopback`'s ``durable`` copy with ``O_DIRECT``, as the product now writes
    (``model_store/uploads/direct_io.py``), done the fastest plain way: the receiver reads the
    socket straight into a page-aligned buffer of ``DIRECT_BUFFER_BYTES`` and writes it whole
    with ``O_DIRECT`` (a tail shorter than a block the ordinary way), fsyncs after every chunk
    and acknowledges it before the client sends the next. None where the temp dir's file system
    refuses ``O_DIRECT``."""
    dest.write_bytes(b"")
    direct_fd = open_direct(dest)
    if direct_fd is None:
        return None
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    failure: list[BaseException] = []

    def receive() -> None:
        try:
            conn, _ = server.accept()
            buf = mmap.mmap(-1, DIRECT_BUFFER_BYTES)
            view = memoryview(buf)
            fd = os.open(dest, os.O_WRONLY)
            try:
                received = landed = 0
                while received < size:
                    chunk_end = min(size, (received // chunk + 1) * chunk)
                    filled = 0
                    while received < chunk_end:
                        wanted = min(DIRECT_BUFFER_BYTES - filled, chunk_end - received)
                        n = conn.recv_into(view[filled:], wanted)
                        if not n:
                            raise RuntimeError("the client went away")
                        filled += n
                        received += n
                        if filled == DIRECT_BUFFER_BYTES or received == chunk_end:
                            aligned = filled - filled % DIRECT_ALIGN
                            if aligned:
                                os.pwrite(direct_fd, view[:aligned], landed)
                            if filled > aligned:
                                os.pwrite(fd, view[aligned:filled], landed + aligned)
                            landed += filled
                            filled = 0
                    os.fsync(fd)
                    conn.sendall(b"k" if received < size else b"K")
            finally:
                view.release()
                buf.close()
                os.close(fd)
                conn.close()
        except BaseException as exc:  # reported by the caller
            failure.append(exc)

    thread = threading.Thread(target=receive, name="raw-direct-receiver", daemon=True)
    thread.start()
    buf = bytearray(chunk)
    view = memoryview(buf)
    started = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port)) as sock, source.open("rb") as src:
            sent = 0
            while n := src.readinto(buf):
                sock.sendall(view[:n])
                sent += n
                if sent < size and sock.recv(1) != b"k":
                    raise RuntimeError("the raw receiver did not acknowledge a chunk")
            ack = sock.recv(1)
        elapsed = time.perf_counter() - started
    finally:
        thread.join(60)
        server.close()
        os.close(direct_fd)
    if failure:
        raise RuntimeError(f"the raw receiver failed: {failure[0]!r}")
    if ack != b"K" or dest.stat().st_size != size:
        raise RuntimeError(f"the raw copy is incomplete ({dest.stat().st_size} of {size} bytes)")
    dest.unlink()
    return elapsed


# --------------------------------------------------------------------------- memory sampling


class RssSampler:
    """Samples the RSS of some processes every ``interval`` seconds in a thread."""

    def __init__(self, processes: dict[str, psutil.Process | None], interval: float = 0.1):
        self.processes = {k: p for k, p in processes.items() if p is not None}
        self.interval = interval
        self.peak: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _sample(self) -> None:
        for name, proc in self.processes.items():
            with contextlib.suppress(psutil.Error):
                rss = proc.memory_info().rss
                self.peak[name] = max(self.peak.get(name, 0), rss)
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def _io(proc: psutil.Process | None) -> dict[str, float] | None:
    if proc is None:
        return None
    try:
        io = proc.io_counters()
        cpu = proc.cpu_times()
    except psutil.Error:
        return None
    cancelled = 0
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{proc.pid}/io").read_text().splitlines():
            if line.startswith("cancelled_write_bytes:"):
                cancelled = int(line.split()[1])
    return {
        "cancelled_write_bytes": cancelled,
        "read_chars": io.read_chars,
        "write_chars": io.write_chars,
        "write_bytes": io.write_bytes,
        "cpu_s": cpu.user + cpu.system,
        "user_s": cpu.user,
        "system_s": cpu.system,
    }


# --------------------------------------------------------------------------- the product


def product_upload(api: Api, source: Path, size: int, web: psutil.Process | None) -> dict[str, Any]:
    """Uploads ``source`` through the chunked API on ``api``'s one connection, then deletes it."""
    me = psutil.Process()
    api.call("GET", "/api/v1/health/live")  # the connection is open and the web process warm
    time.sleep(0.5)
    pre = {"web": web.memory_info().rss if web else 0, "client": me.memory_info().rss}
    io_before = _io(web)
    chunk_seconds: list[float] = []
    with RssSampler({"web": web, "client": me}) as sampler:
        started = time.perf_counter()
        upload = api.call("POST", "/api/v1/uploads", {"filename": "big.onnx", "size": size}, 201)
        chunk = int(upload["chunk_bytes"])
        buf = bytearray(chunk)
        view = memoryview(buf)
        offset = 0
        with source.open("rb") as src:
            while n := src.readinto(buf):
                t0 = time.perf_counter()
                status, _, body = api.raw(
                    "PUT",
                    f"/api/v1/uploads/{upload['id']}",
                    body=view[:n],
                    headers={
                        "Upload-Offset": str(offset),
                        "Content-Type": "application/octet-stream",
                        "Content-Length": str(n),
                    },
                )
                chunk_seconds.append(time.perf_counter() - t0)
                if status != 200:
                    raise ApiError(f"PUT chunk at {offset} -> {status}: {body[:300]!r}")
                received = int(json.loads(body)["offset"])
                if received != offset + n:
                    raise ApiError(f"the server has {received} bytes, expected {offset + n}")
                offset = received
        elapsed = time.perf_counter() - started
    io_after = _io(web)
    t0 = time.perf_counter()
    api.call("DELETE", f"/api/v1/uploads/{upload['id']}", expect=204)
    delete_s = time.perf_counter() - t0
    result: dict[str, Any] = {
        "seconds": elapsed,
        "mb_per_s": size / elapsed / 1e6,
        "chunk_bytes": chunk,
        "chunks": len(chunk_seconds),
        "chunk_seconds": {
            "median": median(chunk_seconds),
            "p95": percentile(chunk_seconds, 95),
            "max": max(chunk_seconds),
            "first": chunk_seconds[0],
        },
        "delete_seconds": delete_s,
        "connections_opened": api.connections_opened,
        "rss_samples": sampler.samples,
        "client_rss_peak_growth_mib": (sampler.peak.get("client", 0) - pre["client"]) / MIB,
    }
    if web is not None:
        result |= {
            "web_pid": web.pid,
            "web_rss_before_mib": pre["web"] / MIB,
            "web_rss_peak_mib": sampler.peak.get("web", 0) / MIB,
            "web_rss_peak_growth_mib": (sampler.peak.get("web", 0) - pre["web"]) / MIB,
        }
    if io_before and io_after:
        delta = {k: io_after[k] - io_before[k] for k in io_before}
        result["web_process"] = {
            "cpu_seconds": delta["cpu_s"],
            "user_seconds": delta["user_s"],
            "system_seconds": delta["system_s"],
            "cpu_share_of_wall": delta["cpu_s"] / elapsed,
            # write_chars: bytes passed to write(2) (page cache included), per uploaded byte.
            "written_per_uploaded_byte": delta["write_chars"] / size,
            "read_per_uploaded_byte": delta["read_chars"] / size,
            # write_bytes: pages dirtied for the disk; cancelled: dirtied pages of files that
            # were deleted (or truncated) before writeback, i.e. temp files that never hit disk.
            "dirtied_per_uploaded_byte": delta["write_bytes"] / size,
            "dirtied_then_discarded_per_uploaded_byte": delta["cancelled_write_bytes"] / size,
        }
    return result


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("1G"), help="default 1G")
    parser.add_argument(
        "--baseline-runs",
        type=int,
        default=4,
        help="raw loopback runs of each kind, split before/after the product upload (default 4)",
    )
    add_stack_arguments(parser)
    args = parser.parse_args()
    size = int(args.size)

    results: dict[str, Any] = {"benchmark": "upload_throughput", "machine": machine()}
    results["size_bytes"] = size
    with temp_workdir("hub-bench-upload-", args.keep_temp) as workdir:
        source = workdir / "big.onnx"
        tell(f"writing {size / MIB:.0f} MiB of random bytes to {source} …")
        results["file_write_seconds"] = make_file(source, size)
        with stack_from_args(args, workdir) as (url, token, stack):
            results["stack"] = "private (python -m webapp.stack)" if stack else url
            api = Api(url, token)
            try:
                web = stack.web_process() if stack else listening_process(api.port)
                if web is None:
                    tell("the web process is not visible; RSS is not measured")
                name = f"bench-upload-{int(time.time())}"
                api.call("POST", "/api/v1/models", {"name": name, "target": "onnxruntime"}, 201)
                info = api.call("GET", "/api/v1/health/live")
                results["health_live"] = info
                # The server's chunk size is what the product client uses; ask it first so the
                # baseline reads the file the same way.
                probe = api.call(
                    "POST", "/api/v1/uploads", {"filename": "probe.onnx", "size": 1}, 201
                )
                api.call("DELETE", f"/api/v1/uploads/{probe['id']}", expect=204)
                chunk = int(probe["chunk_bytes"])

                raw: list[float] = []
                raw_sync: list[float] = []
                raw_durable: list[float] = []
                raw_direct: list[float] = []
                before = (args.baseline_runs + 1) // 2
                after = args.baseline_runs - before

                def baseline(n: int) -> None:
                    for _ in range(n):
                        for runs, mode, label in (
                            (raw, "end", "raw loopback"),
                            (raw_sync, "chunk", "raw loopback, fsync per chunk"),
                            (raw_durable, "durable", "raw loopback, durable like the product"),
                        ):
                            runs.append(
                                raw_loopback(source, size, workdir / "raw.bin", chunk, mode)
                            )
                            tell(f"{label}: {runs[-1]:.2f} s ({size / runs[-1] / 1e6:.0f} MB/s)")
                        direct = raw_loopback_direct(source, size, workdir / "raw.bin", chunk)
                        if direct is not None:
                            raw_direct.append(direct)
                            tell(
                                "raw loopback, durable like the product, O_DIRECT: "
                                f"{direct:.2f} s ({size / direct / 1e6:.0f} MB/s)"
                            )

                baseline(before)
                tell(f"product upload of {size / MIB:.0f} MiB in {chunk / MIB:.0f} MiB chunks …")
                product = product_upload(api, source, size, web)
                tell(f"product: {product['seconds']:.2f} s ({product['mb_per_s']:.0f} MB/s)")
                baseline(after)
            finally:
                api.close()
            if stack is not None:
                results["stack_log_tail"] = stack.log_path.read_text(errors="replace")[-2000:]

    raw_s = median(raw)
    raw_sync_s = median(raw_sync)
    raw_durable_s = median(raw_durable)
    results |= {
        "raw_loopback": {
            "runs_seconds": raw,
            "median_seconds": raw_s,
            "mb_per_s": size / raw_s / 1e6,
        },
        "raw_loopback_fsync_per_chunk": {
            "runs_seconds": raw_sync,
            "median_seconds": raw_sync_s,
            "mb_per_s": size / raw_sync_s / 1e6,
        },
        "raw_loopback_durable": {
            "runs_seconds": raw_durable,
            "median_seconds": raw_durable_s,
            "mb_per_s": size / raw_durable_s / 1e6,
        },
        "raw_loopback_durable_direct": {
            "runs_seconds": raw_direct,
            "median_seconds": median(raw_direct) if raw_direct else None,
            "mb_per_s": size / median(raw_direct) / 1e6 if raw_direct else None,
        },
        "product": product,
        "ratio_product_to_raw": raw_s / product["seconds"],
        "ratio_product_to_raw_fsync_per_chunk": raw_sync_s / product["seconds"],
        "ratio_product_to_raw_durable": raw_durable_s / product["seconds"],
        "ratio_product_to_raw_durable_direct": (
            median(raw_direct) / product["seconds"] if raw_direct else None
        ),
        "goals": {
            "ratio_product_to_raw_min": 0.8,
            "ratio_product_to_raw_durable_min": 0.8,
            "web_rss_peak_growth_mib_max": 64,
        },
    }
    if "web_rss_peak_growth_mib" in product:
        results["web_rss_growth_per_chunk"] = product["web_rss_peak_growth_mib"] * MIB / chunk
    path = write_results("upload_throughput", results)

    rows = [
        ("measure", "seconds", "MB/s", "vs raw"),
        ("raw loopback -> file (baseline)", f"{raw_s:.2f}", f"{size / raw_s / 1e6:.0f}", "1.00"),
        (
            "raw loopback -> file, fsync per chunk",
            f"{raw_sync_s:.2f}",
            f"{size / raw_sync_s / 1e6:.0f}",
            f"{raw_s / raw_sync_s:.2f}",
        ),
        (
            "raw loopback -> file, durable like the product",
            f"{raw_durable_s:.2f}",
            f"{size / raw_durable_s / 1e6:.0f}",
            f"{raw_s / raw_durable_s:.2f}",
        ),
        *(
            [
                (
                    "raw loopback -> file, durable, O_DIRECT",
                    f"{median(raw_direct):.2f}",
                    f"{size / median(raw_direct) / 1e6:.0f}",
                    f"{raw_s / median(raw_direct):.2f}",
                )
            ]
            if raw_direct
            else []
        ),
        (
            "product: chunked API upload",
            f"{product['seconds']:.2f}",
            f"{product['mb_per_s']:.0f}",
            f"{results['ratio_product_to_raw']:.2f}",
        ),
    ]
    print()
    print(f"Upload of {size / MIB:.0f} MiB, {product['chunks']} chunks of {chunk / MIB:.0f} MiB")
    print(table(rows))
    print()
    print(f"throughput ratio product/raw: {results['ratio_product_to_raw']:.2f} (goal >= 0.8)")
    print(
        "throughput ratio product/raw durable like the product: "
        f"{results['ratio_product_to_raw_durable']:.2f} (goal >= 0.8)"
    )
    if raw_direct:
        print(
            "throughput ratio product/raw durable with O_DIRECT (informational): "
            f"{results['ratio_product_to_raw_durable_direct']:.2f}"
        )
    if "web_rss_peak_growth_mib" in product:
        print(
            f"web (uvicorn) RSS: {product['web_rss_before_mib']:.0f} MiB before, peak growth "
            f"{product['web_rss_peak_growth_mib']:.1f} MiB (goal < 64 MiB; "
            f"{product['rss_samples']} samples at 100 ms)"
        )
    if "web_process" in product:
        wp = product["web_process"]
        print(
            f"web process during the upload: {wp['cpu_seconds']:.1f} CPU s "
            f"({wp['cpu_share_of_wall']:.0%} of wall); per uploaded byte: write() "
            f"{wp['written_per_uploaded_byte']:.2f}, read() {wp['read_per_uploaded_byte']:.2f}"
        )
    cs = product["chunk_seconds"]
    print(
        f"per chunk: median {cs['median'] * 1000:.0f} ms, p95 {cs['p95'] * 1000:.0f} ms, "
        f"max {cs['max'] * 1000:.0f} ms; connections opened: {product['connections_opened']}; "
        f"client RSS growth {product['client_rss_peak_growth_mib']:.1f} MiB"
    )
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
