"""An SDK's API errors as ``ModelError`` reasons, the same for every provider.

429 is ``rate_limited`` with the ``retry-after`` / ``retry-after-ms`` the provider sent; 408 and
the SDK's own timeout are ``timeout``; 409, 5xx (Anthropic's 529 overloaded included) and
connection errors are ``unavailable``; any other 4xx is ``rejected`` (never retried by default),
with the provider's own message. An error event inside a stream (HTTP 200) is read by its type.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from types import ModuleType
from typing import Any

from toolvisor.contract import ModelError, ModelErrorReason

_STREAM_ERRORS: dict[str, ModelErrorReason] = {
    "rate_limit_error": "rate_limited", "rate_limit_exceeded": "rate_limited",
    "invalid_request_error": "rejected", "authentication_error": "rejected",
    "permission_error": "rejected", "not_found_error": "rejected",
    "request_too_large": "rejected", "billing_error": "rejected", "invalid_prompt": "rejected",
}
"""Error types a provider puts in a stream's error event; any other is ``unavailable``."""


def model_error(exc: Any, sdk: ModuleType, http: ModuleType) -> ModelError:
    """The ``ModelError`` for ``exc``: one of ``sdk``'s ``APIError`` classes (OpenAI's and
    Anthropic's SDKs share their names and shape), or an error of ``http``, their HTTP client,
    that the SDK let through (a stream broken while it is read)."""
    if isinstance(exc, sdk.APITimeoutError | http.TimeoutException):
        return ModelError("timeout", f"the provider did not answer in time: {exc}", cause=exc)
    if isinstance(exc, sdk.APIConnectionError | http.TransportError):
        return ModelError("unavailable", f"the connection to the provider failed: {exc}",
                          cause=exc)
    if isinstance(exc, sdk.APIResponseValidationError):
        return ModelError("invalid_response", f"the provider's answer could not be read: {exc}",
                          status=exc.status_code, cause=exc)
    kind, message = error_fields(exc.body, str(exc))
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or status < 400:  # an error event inside a stream
        return ModelError(stream_error_reason(kind),
                          f"the provider's stream failed ({kind}): {message}", cause=exc)
    wait = retry_after(exc.response.headers) if status == 429 else None
    return ModelError(status_reason(status), f"HTTP {status}: {message}", status=status,
                      retry_after=wait, cause=exc)


def stream_error_reason(kind: str | None) -> ModelErrorReason:
    """The reason an error reported inside a stream (or a failed response) means, by its type."""
    return _STREAM_ERRORS.get(kind or "", "unavailable")


def status_reason(status: int) -> ModelErrorReason:
    """The reason an HTTP error status means."""
    if status == 429:
        return "rate_limited"
    if status == 408:
        return "timeout"
    if status == 409 or status >= 500:
        return "unavailable"
    return "rejected"


def error_fields(body: Any, fallback: str) -> tuple[str | None, str]:
    """The error's type (or code) and the provider's message, from an error body in either
    provider's shape (``{"error": {"type", "message"}}`` or the inner object alone)."""
    error = body.get("error", body) if isinstance(body, Mapping) else body
    if not isinstance(error, Mapping):
        return None, str(error) if isinstance(error, str) and error else fallback
    kind = error.get("type") or error.get("code")
    message = error.get("message")
    return (str(kind) if kind else None), (message if isinstance(message, str) and message
                                           else fallback)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the provider asked to wait: ``retry-after-ms``, else ``retry-after`` (seconds or
    an HTTP date); ``None`` when it did not say, or said nothing usable."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            seconds = _seconds_until(value) if name == "retry-after" else math.nan
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


def _seconds_until(date: str) -> float:
    try:
        return parsedate_to_datetime(date).timestamp() - time.time()
    except (TypeError, ValueError, IndexError):
        return math.nan
