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


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    meaning = {
        400: "Bad input",
        401: "Not signed in / bad token",
        403: "Role too low or CSRF failed",
        404: "Not found",
        409: "Conflict",
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
            "schemas": {"Error": ERROR, "Model": MODEL, "Triton": TRITON},
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
            "/api/v1/schema": {
                "get": {
                    "summary": "This document",
                    "responses": {"200": {"description": "OpenAPI"}},
                }
            },
        },
    }
