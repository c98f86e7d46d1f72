"""``ProviderModel``: what every provider adapter shares.

An adapter is an async model (``arespond``) over its SDK's async client, with the SDK's own
retries off so that toolvisor's ``on_model_error`` owns retries and its ``Timeouts.model`` the
deadline of the whole answer; ``first_byte_timeout`` bounds the wait for the provider's first
byte apart from it (the HTTP client's read timeout), so a server that takes the connection and
never answers ends the attempt early. Each call sends the adapter's settings with the
request; with ``stream=True`` it streams, reports text deltas as ``model_text_delta`` progress
and assembles the provider's answer from the stream into the very body the same call without
streaming returns, so both read into the same ``ModelResponse``. SDK errors become
``ModelError`` reasons.

A provider's adapter says which SDK and client class it uses, the fields it sets itself, and
four things: the endpoint, the request body, the stream's assembler and how a body reads.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Protocol

from toolvisor.contract import (
    ModelError,
    ModelRequest,
    ModelResponse,
    ToolCall,
    check_seconds,
    report_model_progress,
)
from toolvisor.models._errors import model_error
from toolvisor.models._sdk import client_factory, import_sdk, read_timeout

Body = Mapping[str, Any]
"""A provider's answer as its wire JSON (a completion, a response, a message)."""


class Assembler(Protocol):
    """Puts a provider's stream back together into the body a plain call returns."""

    def add(self, event: Body) -> str | None:
        """Take one event; returns its text delta, if it has one."""

    def body(self) -> Body:
        """The whole answer; a stream that ended before its last event is ``unavailable``."""


class ProviderModel(ABC):
    """One provider's model, through its SDK's async client.

    ``model`` is the provider's model name. ``api_key`` and ``base_url`` default to the SDK's
    environment variables; or give a ready ``client`` (the SDK's async client, used with
    ``max_retries=0``). ``stream=True`` streams each answer. ``first_byte_timeout`` (seconds,
    default ``None``: only the agent's ``Timeouts.model``) is how long the provider may send
    nothing: before the first byte of its answer, and between two reads of it (the HTTP
    client's read timeout); past it the attempt fails with ``timeout``. ``settings`` go with
    every request (``temperature``, ``max_tokens``, ...) except the fields the adapter sets
    itself. The agent closes the adapter's connections (:meth:`aclose`) when it closes; the
    next call opens new ones (a ``client`` given to the adapter is closed with it).
    """

    _SDK: ClassVar[str]  # the SDK's module, which is also the name of toolvisor's extra
    _CLIENT: ClassVar[str]  # its async client class
    _SETS: ClassVar[frozenset[str]]  # request fields the adapter sets itself
    _STREAM_SETTINGS: ClassVar[Mapping[str, Any]] = {}  # defaults of a streamed request

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 client: Any = None, stream: bool = False,
                 first_byte_timeout: float | None = None, **settings: Any) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError(f"{type(self).__name__} needs a model name, got {model!r}")
        if first_byte_timeout is not None:
            check_seconds(f"{type(self).__name__}(first_byte_timeout=...)", first_byte_timeout,
                          positive=True)
        taken = sorted(set(settings) & self._SETS)
        if taken:
            raise TypeError(f"{type(self).__name__} sets {taken} itself; they are not settings")
        self._sdk = import_sdk(self._SDK, self._SDK)
        self._http = import_sdk("httpx2", self._SDK)  # the SDK's HTTP client
        self._make_client = client_factory(getattr(self._sdk, self._CLIENT), client, base_url,
                                           api_key, read_timeout(self._sdk, self._http, client,
                                                                 first_byte_timeout))
        self.first_byte_timeout = first_byte_timeout
        self._client: Any = self._make_client()
        self.model = model
        self.stream = bool(stream)
        self.settings = dict(settings)

    @property
    def client(self) -> Any:
        """The SDK's async client (its own retries off); opened again after :meth:`aclose`."""
        if self._client is None:
            self._client = self._make_client()
        return self._client

    async def arespond(self, request: ModelRequest) -> ModelResponse:
        """Ask the provider; whatever goes wrong is a ``ModelError``."""
        create = self._endpoint()
        body = {**self._request_body(request), **self.settings}
        try:
            if not self.stream:
                return self._read(wire(await create(**body)))
            assembled = self._assembler()
            async with await create(**{**self._STREAM_SETTINGS, **body}, stream=True) as events:
                async for event in events:  # leaving early closes the response at once
                    text = assembled.add(wire(event))
                    if text:
                        report_model_progress("model_text_delta", text=text)
            return self._read(assembled.body())
        except (self._sdk.APIError, self._http.TransportError) as exc:
            error = model_error(exc, self._sdk, self._http)
            if error.reason == "timeout" and self.first_byte_timeout is not None:
                error = ModelError("timeout", f"the provider sent nothing for "
                                   f"first_byte_timeout={self.first_byte_timeout:g} s (or could "
                                   f"not be reached in time): {exc}", cause=exc)
            raise error from exc
        except (LookupError, TypeError, ValueError, AttributeError) as exc:
            raise ModelError("invalid_response", f"the provider's answer could not be read: "
                             f"{type(exc).__name__}: {exc}", cause=exc) from exc

    async def aclose(self) -> None:
        """Close the client's connections; the next call opens a new client."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    @abstractmethod
    def _endpoint(self) -> Callable[..., Awaitable[Any]]:
        """The SDK's ``create`` for this API."""

    @abstractmethod
    def _request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The provider's request for ``request``, before the settings."""

    @abstractmethod
    def _assembler(self) -> Assembler:
        """A fresh assembler for one streamed answer."""

    @abstractmethod
    def _read(self, body: Body) -> ModelResponse:
        """The ``ModelResponse`` a body says."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r}, stream={self.stream})"


def wire(value: Any) -> Body:
    """An SDK object as its wire JSON (plain dicts, the provider's field names)."""
    if isinstance(value, Mapping):
        return value
    to_dict = getattr(value, "to_dict", None)
    if to_dict is None:
        raise ModelError("invalid_response", f"the provider answered with a "
                         f"{type(value).__name__}, not a JSON object", cause=repr(value)[:500])
    body: Body = to_dict(warnings=False)
    return body


def arguments_text(call: ToolCall) -> str:
    """A call's arguments as the model wrote them (its raw text when it sent text)."""
    if call.raw_arguments is not None:
        return call.raw_arguments
    return json.dumps(call.arguments, ensure_ascii=False)


def tokens(value: Any) -> int:
    """A token count from a usage object (0 when missing)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
