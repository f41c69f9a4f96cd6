"""The OpenAPI document for ``/api/v1/``, written by hand next to the views it describes."""

from __future__ import annotations

from typing import Any

ERROR = {
    "type": "object",
    "required": ["error", "code"],
    "properties": {
        "error": {"type": "string", "description": "What happened and what to do, in plain words."},
        "code": {"type": "string", "description": "A stable machine-readable code."},
    },
}

CHECK = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "detail": {"type": "string"}},
}

MODEL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"},
        "target": {"type": "string", "enum": ["onnxruntime", "npu_ge", "acl"]},
        "description": {"type": "string"},
        "created": {"type": "string", "format": "date-time"},
        "created_by": {"type": ["string", "null"]},
        "serving_version": {"type": ["integer", "null"]},
        "versions": {"type": "array", "items": {"type": "object"}},
    },
}

TRITON = {
    "type": "object",
    "properties": {
        "url": {"type": "string"},
        "embedded": {"type": "boolean"},
        "live": {"type": "boolean"},
        "ready": {"type": "boolean"},
        "name": {"type": ["string", "null"]},
        "version": {"type": ["string", "null"]},
        "extensions": {"type": "array", "items": {"type": "string"}},
        "repository": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "version": {"type": "string"},
                    "state": {"type": "string"},
                    "reason": {"type": "string"},
                },
            },
        },
        "error": {"type": ["string", "null"]},
    },
}


DIAGNOSTIC_STATES = ["ok", "warning", "failing", "not_applicable"]

DIAGNOSTIC = {
    "type": "object",
    "required": ["id", "title", "state", "found", "advice", "details"],
    "properties": {
        "id": {
            "type": "string",
            "description": "cann_env, atc, npu_ge_backend, davinci_devices, npu_smi, "
            "triton_reachable, triton_access, stuck_loading, load_failures",
        },
        "title": {"type": "string"},
        "state": {"type": "string", "enum": DIAGNOSTIC_STATES},
        "found": {"type": "string", "description": "What the check found, with the values."},
        "advice": {"type": "string", "description": "What to do; empty when ok."},
        "details": {"type": "array", "items": {"type": "string"}},
    },
}

DIAGNOSTICS = {
    "type": "object",
    "required": ["checks", "summary", "ran_at"],
    "properties": {
        "checks": {"type": "array", "items": DIAGNOSTIC},
        "summary": {
            "type": "object",
            "description": "How many checks are in each state.",
            "properties": {s: {"type": "integer"} for s in DIAGNOSTIC_STATES},
        },
        "summary_line": {"type": "string", "examples": ["8 checks: 4 ok, 4 not applicable"]},
        "ran_at": {"type": "string", "format": "date-time"},
        "host": {"type": "string", "description": "The host the checks ran on (the web's)."},
    },
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    meaning = {
        400: "Bad input",
        401: "Not signed in / bad token",
        403: "Role too low or CSRF failed",
        404: "Not found",
        409: "Conflict",
        413: "Too large",
        415: "Not an image",
        422: "Wrong dtype or shape",
        429: "Rate limited (see Retry-After)",
        503: "Unhealthy",
        504: "Timed out",
    }
    return {str(c): _json(ERROR, meaning[c]) for c in codes}


def openapi_schema() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Triton Model Hub API",
            "version": "1",
            "description": "Authenticate with `Authorization: Token <key>` "
            "(`python manage.py apitoken USERNAME`) or a browser session (then send X-CSRFToken "
            "on writes). Every error is `{error, code}`.",
        },
        "components": {
            "securitySchemes": {
                "token": {"type": "apiKey", "in": "header", "name": "Authorization"},
                "session": {"type": "apiKey", "in": "cookie", "name": "sessionid"},
            },
            "schemas": {
                "Error": ERROR,
                "Model": MODEL,
                "Triton": TRITON,
                "Diagnostics": DIAGNOSTICS,
            },
        },
        "security": [{"token": []}, {"session": []}],
        "paths": {
            "/api/v1/health": {
                "get": {
                    "summary": "Web, database, broker, workers and Triton: each ok or the reason",
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {
                                    "status": {"type": "string", "enum": ["ok", "failing"]},
                                    "checks": {"type": "object", "additionalProperties": CHECK},
                                },
                            },
                            "All parts are healthy",
                        ),
                        **_errors(401, 503),
                    },
                }
            },
            "/api/v1/health/live": {
                "get": {
                    "summary": "Liveness of the web process only; needs no authentication",
                    "security": [],
                    "responses": {"200": {"description": "The web process answers"}},
                }
            },
            "/api/v1/server": {
                "get": {
                    "summary": "Triton metadata, repository index, devices",
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {"triton": TRITON, "devices": {"type": "object"}},
                            },
                            "Server state",
                        ),
                        **_errors(401),
                    },
                }
            },
            "/api/v1/devices": {
                "get": {
                    "summary": "Ascend NPUs (npu-smi), or why there are none",
                    "responses": {"200": {"description": "Devices"}, **_errors(401)},
                }
            },
            "/api/v1/diagnostics": {
                "get": {
                    "summary": "The troubleshooting checklist (CANN, ATC, npu_ge backend, NPU "
                    "devices, npu-smi, Triton, stuck and failed loads): each check's state, "
                    "what it found and what to do. Runs in the web process, on its host.",
                    "responses": {
                        "200": _json(DIAGNOSTICS, "Every check ran; a check that broke is failing"),
                        **_errors(401),
                    },
                }
            },
            "/api/v1/models": {
                "get": {
                    "summary": "List models",
                    "responses": {
                        "200": _json(
                            {
                                "type": "object",
                                "properties": {"models": {"type": "array", "items": MODEL}},
                            },
                            "Models",
                        ),
                        **_errors(401),
                    },
                },
                "post": {
                    "summary": "Create a model (operator)",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["name"],
                                    "properties": {
                                        "name": MODEL["properties"]["name"],
                                        "target": MODEL["properties"]["target"],
                                        "description": {"type": "string", "maxLength": 2000},
                                    },
                                }
                            }
                        },
                    },
                    "responses": {"201": _json(MODEL, "Created"), **_errors(400, 401, 403, 409)},
                },
            },
            "/api/v1/models/{name}": {
                "get": {
                    "summary": "Model detail",
                    "parameters": [
                        {
                            "name": "name",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {"200": _json(MODEL, "The model"), **_errors(401, 404)},
                }
            },
            **_more_paths(),
            **_metrics_paths(),
            **_try_paths(),
            **_memory_paths(),
            "/api/v1/schema": {
                "get": {
                    "summary": "This document",
                    "responses": {"200": {"description": "OpenAPI"}},
                }
            },
        },
    }


def _op(summary: str, *codes: int, body: dict[str, Any] | None = None, ok: str = "200") -> dict:
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {ok: {"description": "OK"}, **_errors(*codes)},
    }
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
NAME = [{"name": "name", "in": "path", "required": True, "schema": STR}]
VERSION = [*NAME, {"name": "number", "in": "path", "required": True, "schema": INT}]


def _more_paths() -> dict[str, Any]:
    """Uploads, versions, jobs and serving."""
    return {
        "/api/v1/targets": {
            "get": _op("Targets with their compile options (JSON schema) and status", 401)
        },
        "/api/v1/uploads": {
            "post": _op(
                "Start a chunked upload (operator); answer has id and chunk_bytes",
                400,
                401,
                403,
                413,
                body=_obj(filename=STR, size=INT, sha256=STR),
                ok="201",
            )
        },
        "/api/v1/uploads/{upload_id}": {
            "get": _op("Bytes received so far (the offset to resume from)", 401, 404),
            "put": _op(
                "Send one chunk: raw body, header Upload-Offset; 409 carries the expected offset",
                400,
                401,
                403,
                404,
                409,
                413,
            ),
            "delete": _op("Cancel and delete everything received", 401, 404, ok="204"),
        },
        "/api/v1/models/{name}/versions": {
            "get": {
                "summary": "Versions of a model",
                "parameters": NAME,
                "responses": {"200": {"description": "OK"}},
            },
            "post": _op(
                "New version from a finished upload ({upload_id, sha256?, options?, "
                "allow_duplicate?}) or one multipart 'file' (+ 'options' JSON); "
                "201 {version, job}; 409 duplicate",
                400,
                401,
                403,
                404,
                409,
                body=_obj(
                    upload_id=STR, sha256=STR, options={"type": "object"}, allow_duplicate=BOOL
                ),
                ok="201",
            ),
        },
        "/api/v1/models/{name}/versions/{number}": {
            "get": _op("Status, signature, options, findings, verification, config", 401, 404),
            "delete": _op(
                "Delete a version that is not serving (files and record)",
                401,
                403,
                404,
                409,
                ok="204",
            ),
        },
        "/api/v1/models/{name}/versions/{number}/override": {
            "post": _op(
                "Allow a version whose verification failed to be published (admin)",
                400,
                401,
                403,
                404,
                409,
                body=_obj(reason=STR),
            )
        },
        "/api/v1/jobs": {"get": _op("Recent jobs", 401)},
        "/api/v1/jobs/{job_id}": {
            "get": _op(
                "State, steps, progress, commands, log (its first JOB_LOG_MAX_LINES lines; "
                "log_lines_more counts the rest, log_url serves all)",
                401,
                404,
            )
        },
        "/api/v1/jobs/{job_id}/log": {
            "get": _op("The full log as a text/plain attachment", 401, 404)
        },
        "/api/v1/jobs/{job_id}/cancel": {
            "post": _op("Ask a running job to stop", 401, 403, 404, 409)
        },
        "/api/v1/models/{name}/serve": {
            "post": _op(
                "Switch to a version; returns when it is READY (200) or failed (409, the old one "
                "keeps serving). Breaking interface changes need confirm_breaking.",
                400,
                401,
                403,
                404,
                409,
                body=_obj(version=INT, reason=STR, confirm_breaking=BOOL),
            )
        },
        "/api/v1/models/{name}/rollback": {
            "post": _op(
                "Back to the version that served before", 401, 403, 404, 409, body=_obj(reason=STR)
            )
        },
        "/api/v1/models/{name}/unload": {
            "post": _op("Unload from Triton (clients then fail)", 401, 403, 404, 409)
        },
        "/api/v1/models/{name}/load": {
            "post": _op("Load the serving version again", 401, 403, 404, 409)
        },
        "/api/v1/models/{name}/history": {
            "get": _op("Who switched what, when, why, with evidence", 401, 404)
        },
        "/api/v1/audit": {"get": _op("Every event across models", 401)},
    }


TENSOR = {
    "description": "One input: a nested JSON array; {data, shape}; {b64 (raw little-endian bytes "
    "of the input's dtype), shape}; {npy_b64 (a .npy file)}; or, for image inputs (rank-4 float, "
    "1 or 3 channels), {image_b64 (PNG/JPEG/WebP/GIF/BMP/TIFF), preprocess?}",
}
PREPROCESS = _obj(
    preset={"enum": ["efficientnet", "imagenet", "unit", "raw"]},
    resize_short=INT,
    crop={"type": ["integer", "null"]},
    mean={"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3},
    std={"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 3},
    color={"enum": ["RGB", "BGR"]},
    layout={"enum": ["NCHW", "NHWC"]},
)


def _try_paths() -> dict[str, Any]:
    """Try it: inference, examples, labels, preprocessing, sweeps and the demo model."""
    return {
        "/api/v1/models/{name}/infer": {
            "post": _op(
                "Run one inference on the serving version (or 'version'). Answers outputs "
                "(values; top_k with labels and probabilities for classifiers), input shapes, "
                "latency {triton_ms, hub_ms} and, with snippets=true, the same request as curl "
                "and tritonclient code. Refusals: 400 bad input, 404, 409 not served or version "
                "not loaded, 413 over INFER_MAX_REQUEST_BYTES/INFER_MAX_ELEMENTS/"
                "INFER_MAX_IMAGE_PIXELS, 415 not an image, 422 wrong dtype or shape, "
                "429 over INFER_RATE_PER_MINUTE (Retry-After), 503 Triton down, 504 timeout",
                400,
                401,
                404,
                409,
                413,
                415,
                422,
                429,
                503,
                504,
                body={
                    "type": "object",
                    "required": ["inputs"],
                    "properties": {
                        "inputs": {"type": "object", "additionalProperties": TENSOR},
                        "version": INT,
                        "top_k": {"type": "integer", "minimum": 1, "maximum": 50},
                        "preprocess": PREPROCESS,
                        "snippets": BOOL,
                    },
                },
            )
        },
        "/api/v1/models/{name}/examples": {
            "get": _op("Saved Try it inputs of a model", 401, 404),
            "post": _op(
                "Save an input under a name (at most 50 per model, 8 MiB each)",
                400,
                401,
                404,
                409,
                413,
                body=_obj(name=STR, inputs={"type": "object"}),
                ok="201",
            ),
        },
        "/api/v1/models/{name}/examples/{example_id}": {
            "get": _op("One saved input, to rerun it", 401, 404),
            "delete": _op("Delete it (whoever saved it, or an operator)", 401, 403, 404, ok="204"),
        },
        "/api/v1/models/{name}/labels": {
            "get": _op("Class names used to label top-k", 401, 404),
            "put": _op(
                "Replace them (operator): text/plain, one per line, or a JSON list or object",
                400,
                401,
                403,
                404,
                413,
            ),
        },
        "/api/v1/models/{name}/try-settings": {
            "get": _op(
                "How photos are preprocessed for this model, and which inputs are images", 401, 404
            ),
            "put": _op(
                "Save them (operator)",
                400,
                401,
                403,
                404,
                body=_obj(preprocess=PREPROCESS, image_inputs={"type": "array", "items": STR}),
            ),
        },
        "/api/v1/models/{name}/sweeps": {
            "get": _op("Recent performance sweeps with their levels", 401, 404),
            "post": _op(
                "Start a sweep of the serving version at concurrency 1, 2, 4 ... up to "
                "max_concurrency (<= SWEEP_MAX_CONCURRENCY), step_seconds per level (operator); "
                "202 with the run; cancel through its job",
                400,
                401,
                403,
                404,
                409,
                body=_obj(max_concurrency=INT, step_seconds=INT, example_id=INT),
                ok="202",
            ),
        },
        "/api/v1/models/{name}/sweeps/{run_id}": {
            "get": _op(
                "One sweep: per level throughput, p50/p90/p99, failures and Triton's queue/"
                "compute split (null when the backend reports no statistics)",
                401,
                404,
            )
        },
        "/api/v1/models/{name}/compare": {
            "post": _op(
                "Load version N beside the serving one so both answer (Try it compares them); "
                "{version: null} unloads it again (operator). Returns when READY; not for npu_ge",
                400,
                401,
                403,
                404,
                409,
                body=_obj(version={"type": ["integer", "null"]}),
            )
        },
        "/api/v1/demo": {
            "get": _op("Whether the demo model can be added, and its name once added", 401),
            "post": _op(
                "Add the demo EfficientNet-Lite0 and send it through upload, compile, verify "
                "and serve (operator); 201 {model, version, job}",
                401,
                403,
                404,
                409,
                ok="201",
            ),
        },
    }


_RATE = {"type": "number", "description": "per second over the point's interval"}
_MS = {"type": ["number", "null"], "description": "ms per successful request; null: none"}
METRIC_POINT = _obj(
    t={"type": "number", "description": "interval start, seconds since the epoch"},
    seconds={"type": "number", "description": "seconds of scrape intervals in the point"},
    version={"type": "string", "description": "Triton version label; 'latest' joins them"},
    versions={"type": "array", "items": STR, "description": "'latest' only: its versions"},
    requests=INT,
    requests_per_s=_RATE,
    inferences_per_s=_RATE,
    failures_per_s=_RATE,
    avg_batch={"type": ["number", "null"], "description": "inferences per execution"},
    request_ms=_MS,
    queue_ms=_MS,
    compute_input_ms=_MS,
    compute_infer_ms=_MS,
    compute_output_ms=_MS,
    pending={"type": ["number", "null"], "description": "most requests waiting at a scrape"},
    client_requests_per_s=_RATE,
    client_failures_per_s=_RATE,
    client_latency_ms={
        "type": ["number", "null"],
        "description": "the hub's own calls (Try it, sweeps): mean latency of successful ones",
    },
)
METRICS = _obj(
    model=STR,
    range={"enum": ["1h", "6h", "24h", "7d"]},
    tier={"type": "integer", "description": "bucket width in s; 0: one point per scrape"},
    since={"type": "number"},
    now={"type": "number"},
    scrape_seconds=INT,
    last_scrape={"type": ["number", "null"]},
    statistics={"enum": ["triton", "none (npu_ge)"]},
    versions={"type": "array", "items": STR},
    serving_version={"type": ["integer", "null"]},
    points={"type": "array", "items": METRIC_POINT},
    latest={"oneOf": [METRIC_POINT, {"type": "null"}]},
    totals=_obj(
        seconds={"type": "number"},
        requests=INT,
        failures=INT,
        inferences=INT,
        client_requests=INT,
        client_failures=INT,
    ),
    advice={
        "type": "array",
        "items": _obj(level={"enum": ["ok", "info", "warning"]}, code=STR, message=STR),
    },
)


def _metrics_paths() -> dict[str, Any]:
    return {
        "/api/v1/models/{name}/metrics": {
            "get": {
                "summary": "Throughput, failures, pending and the latency split (queue, compute "
                "input/infer/output) per version, from Triton's metrics scraped every "
                "METRICS_SCRAPE_SECONDS; the hub's own calls (client_*) too, which are the only "
                "numbers for npu_ge models; advice read from them",
                "parameters": [
                    *NAME,
                    {
                        "name": "range",
                        "in": "query",
                        "schema": {"enum": ["1h", "6h", "24h", "7d"], "default": "1h"},
                        "description": "1h: a point per scrape; 6h, 24h: 1-minute buckets; "
                        "7d: 10-minute buckets",
                    },
                ],
                "responses": {"200": _json(METRICS, "The series"), **_errors(400, 401, 404)},
            }
        }
    }


VERDICT = {
    "type": "object",
    "properties": {
        "state": {"enum": ["fits", "tight", "does_not_fit", "unknown"]},
        "fits": {"type": ["boolean", "null"]},
        "message": STR,
        "device": STR,
        "needed_bytes": INT,
        "free_bytes": {"type": ["integer", "null"]},
        "needed_mib": {"type": "number"},
        "free_mib": {"type": ["number", "null"]},
    },
}

MEMORY_ESTIMATE = {
    "type": "object",
    "required": ["model", "version", "estimate", "devices", "summary"],
    "properties": {
        "model": STR,
        "version": INT,
        "target": STR,
        "instances": INT,
        "max_batch": INT,
        "from_config": _obj(
            instances={"type": ["integer", "null"]}, max_batch={"type": ["integer", "null"]}
        ),
        "copies_per_device": {
            "type": "integer",
            "description": "Copies of weights and buffers one device holds: the instance count, "
            "or for npu_ge its GE sessions per device (device_exec_blocks).",
        },
        "copies_note": STR,
        "weights": _obj(bytes=INT, mib={"type": "number"}, source=STR),
        "activations": _obj(
            bytes_per_sample={"type": ["integer", "null"]},
            mib_per_sample={"type": ["number", "null"]},
            method={"enum": ["liveness", "io_factor", "none"]},
            note=STR,
            unknown_tensors=INT,
        ),
        "estimate": _obj(
            weights_bytes=INT,
            instances=INT,
            max_batch=INT,
            batch=INT,
            activation_bytes_per_sample=INT,
            activation_bytes=INT,
            weights_total_bytes=INT,
            activations_total_bytes=INT,
            total_bytes=INT,
            weights_mib={"type": "number"},
            activation_mib={"type": "number"},
            total_mib={"type": "number"},
            description=STR,
        ),
        "devices": _obj(
            available=BOOL,
            reason=STR,
            fit={
                "type": "array",
                "description": "One verdict per NPU chip (Ascend targets only)",
                "items": {
                    "allOf": [
                        VERDICT,
                        _obj(
                            npu_id=INT,
                            chip_id={"type": ["integer", "null"]},
                            name=STR,
                            memory_kind={"enum": ["HBM", "memory"]},
                            total_mib=INT,
                            placed={
                                "type": "boolean",
                                "description": "Named in config.pbtxt device_ids (or no list)",
                            },
                        ),
                    ]
                },
            },
        ),
        "host": {
            "oneOf": [VERDICT, {"type": "null"}],
            "description": "onnxruntime target: this host's available memory",
        },
        "warning": {"type": ["string", "null"], "description": "Set when something does not fit"},
        "summary": STR,
        "approximation": STR,
    },
}


def _memory_paths() -> dict[str, Any]:
    """The memory estimate before raising instances or batch size."""
    query = [
        {
            "name": "instances",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": 256},
            "description": "Instance count to try; default: the version's config.pbtxt",
        },
        {
            "name": "max_batch",
            "in": "query",
            "schema": {"type": "integer", "minimum": 0, "maximum": 65536},
            "description": "max_batch_size to try (0: no batching); default: config.pbtxt",
        },
        {
            "name": "version",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1},
            "description": "Default: the serving version, else the newest packaged one",
        },
    ]
    return {
        "/api/v1/models/{name}/memory-estimate": {
            "get": {
                "summary": "Memory a version needs at an instance count and batch size "
                "(copies x (weights + activations per sample x batch)), compared with each "
                "NPU's free memory (Ascend targets) or this host's (onnxruntime); 'warning' is "
                "set when it would not fit. 409 before the version is validated.",
                "parameters": [*NAME, *query],
                "responses": {
                    "200": _json(MEMORY_ESTIMATE, "The estimate and the verdicts"),
                    **_errors(400, 401, 404, 409),
                },
            }
        },
    }
