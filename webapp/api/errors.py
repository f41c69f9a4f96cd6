"""One error shape for the whole API: ``{"error": "plain words", "code": "machine_code"}``."""

from __future__ import annotations

from django.http import JsonResponse


class ApiError(Exception):
    """Raise from an API view; ``webapp.api.decorators.api_view`` turns it into a response."""

    def __init__(self, message: str, code: str = "bad_request", status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


def error_response(message: str, code: str, status: int) -> JsonResponse:
    return JsonResponse({"error": message, "code": code}, status=status)
