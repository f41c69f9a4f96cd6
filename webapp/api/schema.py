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
            "triton_reachable, stuck_loading, load_failures",
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
        503: "Unhealthy",
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
        "/api/v1/jobs/{job_id}": {"get": _op("State, steps, progress, commands, log", 401, 404)},
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
