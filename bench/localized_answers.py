"""What saying an API answer in the caller's language costs (``webapp.text.localized``).

Every ``/api/v1/`` answer passes through ``localized``, which finds the messages in it and says
them in the request's language. An inference answer is mostly numbers: the demo model's
1,000 class scores, or, for a detection or segmentation model, hundreds of thousands. The
walk used to call itself once per number; it now looks at a list of plain values once and
answers it as it is.

This script times, in one run and alternating, the walk as it was (``baseline``, kept here)
against ``webapp.text.localized`` on four answers: the demo model's infer answer, a 1 M-float
output in v2 form, a page of 50 jobs with stored messages (where the walk must still find
every message) and a model list. It prints microseconds per answer and the ratio; results go
to bench/results/. No stack is started.

    .venv/bin/python bench/localized_answers.py --rounds 7
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django  # noqa: E402

django.setup()

from bench._stack import machine, write_results  # noqa: E402
from model_store.text import Message, is_message_json, say  # noqa: E402
from webapp.text import localize, localized  # noqa: E402


def baseline(data: Any) -> Any:
    """The walk before this change: one call per item, numbers included."""
    if isinstance(data, Message) or is_message_json(data):
        return localize(data)
    if isinstance(data, Mapping):
        return {key: baseline(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [baseline(item) for item in data]
    return data


def answers() -> dict[str, Any]:
    rng = random.Random(7)
    scores = [rng.random() for _ in range(1000)]
    demo = {
        "model": "efficientnet-lite0",
        "version": 1,
        "outputs": {
            "Softmax": {
                "shape": [1, 1000],
                "values": scores,
                "top_k": [{"index": i, "label": f"class {i}", "probability": scores[i]}
                          for i in range(5)],
            }
        },
        "inputs": {"images": [1, 224, 224, 3]},
        "latency": {"triton_ms": 7.1, "hub_ms": 9.4},
    }  # fmt: skip
    big = {
        "model_name": "segmenter",
        "model_version": "1",
        "outputs": [
            {"name": "mask", "datatype": "FP32", "shape": [1, 1000, 1000], "data": [0.5] * 10**6}
        ],
    }
    stored = say("%(user)s uploaded %(file)s as version %(number)s.", user="ada",
                 file="resnet.onnx", number=3).to_json()  # fmt: skip
    jobs = {
        "jobs": [
            {"id": f"job-{i}", "state": "failed", "error": stored,
             "steps": [{"name": s, "state": "done", "message": stored}
                       for s in ("validate", "compile", "verify", "package")]}
            for i in range(50)
        ]
    }  # fmt: skip
    models = {
        "models": [
            {"name": f"m{i}", "tags": ["vision", "prod"], "versions": [1, 2, 3], "state": "READY"}
            for i in range(100)
        ],
        "count": 100,
    }
    return {"demo infer": demo, "1M-float v2 output": big, "50 jobs": jobs, "100 models": models}


def per_call_us(walk: Callable[[Any], Any], data: Any, seconds: float) -> float:
    calls, started = 0, time.perf_counter()
    while True:
        walk(data)
        calls += 1
        spent = time.perf_counter() - started
        if spent >= seconds:
            return spent / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.3, help="per measurement")
    args = parser.parse_args()
    rows = []
    for name, data in answers().items():
        assert localized(data) == baseline(data), name  # the same answer, or no comparison
        before, after = [], []
        for _ in range(args.rounds):  # alternate, so drift hits both
            before.append(per_call_us(baseline, data, args.seconds))
            after.append(per_call_us(localized, data, args.seconds))
        b, a = statistics.median(before), statistics.median(after)
        rows.append({"answer": name, "baseline_us": round(b, 1), "now_us": round(a, 1),
                     "ratio": round(a / b, 3)})  # fmt: skip
        print(f"{name:22} baseline {b:10.1f} us   now {a:10.1f} us   now/baseline {a / b:.3f}")
    write_results("localized_answers", {"benchmark": "localized_answers", "machine": machine(),
                                         "settings": vars(args), "rows": rows})  # fmt: skip


if __name__ == "__main__":
    main()
