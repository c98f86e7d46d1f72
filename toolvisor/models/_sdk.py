"""A provider's SDK, imported only when an adapter is built, and the SDK client an adapter uses."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any


def import_sdk(module: str, extra: str) -> ModuleType:
    """``module``, or an ``ImportError`` that names the toolvisor extra installing it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"this model adapter needs the {module!r} package: "
                          f"pip install '.[{extra}]' in toolvisor's clone") from exc


def client_factory(sdk_client: Callable[..., Any], client: Any, base_url: str | None,
                   api_key: str | None, timeout: Any = None) -> Callable[[], Any]:
    """What builds the adapter's async client, with the SDK's own retries off: toolvisor's
    ``on_model_error`` owns retries. A given ``client`` is copied with ``max_retries=0``.
    ``timeout`` (the HTTP client's ``Timeout``) replaces the client's own, when given."""
    options: dict[str, Any] = {"max_retries": 0}
    if timeout is not None:
        options["timeout"] = timeout
    if client is None:
        return functools.partial(sdk_client, base_url=base_url, api_key=api_key, **options)
    if base_url is not None or api_key is not None:
        raise TypeError("give either client=... or base_url= / api_key=, not both: the client "
                        "already has its own")
    return functools.partial(client.with_options, **options)


def read_timeout(sdk: ModuleType, http: ModuleType, client: Any,
                 first_byte_timeout: float | None) -> Any:
    """The HTTP ``Timeout`` whose read timeout is ``first_byte_timeout``, its other parts those
    of ``client`` (else the SDK's defaults); ``None`` when there is no ``first_byte_timeout``.

    ``sdk`` and ``http`` are the SDK's module and its HTTP client's; ``client`` is the client
    the user gave, or ``None``."""
    if first_byte_timeout is None:
        return None
    base = sdk.DEFAULT_TIMEOUT if client is None else client.timeout
    if not isinstance(base, http.Timeout):
        base = http.Timeout(base)
    return http.Timeout(connect=base.connect, read=first_byte_timeout, write=base.write,
                        pool=base.pool)
