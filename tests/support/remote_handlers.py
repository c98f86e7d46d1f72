"""Module-level handlers that use the whole call context from a worker process or a Ray task
(importable by name there); each reports the pid it ran in, so a test sees it left the agent."""

from __future__ import annotations

import os
import threading
from typing import Any

from toolvisor import CallContext, Ok, Pending


def append_line(path: str, line: str) -> None:
    """A step's side effect: one line per execution, so a test can count executions."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")


def journals(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """One journaled step (its side effect appends a line), then a process event."""
    effects = ctx.durable_effects()
    log = arguments["log"]
    charged = effects.run_json("charge", log, lambda path: append_line(path, "charge") or 42)
    seq = effects.emit_process_event("charged", {"cents": charged})
    return Ok({"charged": charged, "seq": seq, "pid": os.getpid()})


def journals_a_failure(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """A step whose function raises: nothing is journaled, the error reaches the handler."""
    def fail(_: Any) -> Any:
        raise ValueError("card declined")
    try:
        ctx.durable_effects().run_json("charge", 1, fail)
    except ValueError as exc:
        return Ok({"caught": str(exc)})
    return Ok("unreachable")


def nested_step(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """A step whose function itself reads the run's state (a request inside a request)."""
    value = ctx.durable_effects().run_json(
        "read", None, lambda _: (ctx.state.get("city") if ctx.state else None))
    return Ok(value)


def parks(arguments: dict[str, Any], ctx: CallContext) -> Pending:
    """Takes a completion key, journals that it registered a webhook, and parks the call."""
    ctx.completion_key()
    ctx.durable_effects().run_json("register", arguments["log"],
                                   lambda path: append_line(path, "register"))
    return Pending(deadline=600)


def uses_state(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Reads the run's state and writes to it; reports whether the call is cancelled."""
    assert ctx.state is not None
    seen = ctx.state.get("visits", 0)
    ctx.state.set("visits", seen + 1)
    ctx.state.set("worker_pid", os.getpid())
    return Ok({"seen": seen, "cancelled": ctx.cancelled.is_set(), "pid": os.getpid()})


def awaits_event(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Makes an external event key, hands it to the test through a FIFO, awaits its value."""
    effects = ctx.durable_effects()
    key = effects.external_event_key("approval")
    with open(arguments["fifo"], "w", encoding="utf-8") as fifo:
        fifo.write(key)
    return Ok(effects.await_event_json(key, timeout=30))


def waits_for_cancel(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Blocks on the call's cancel token, served by the agent."""
    ctx.cancelled.wait()
    return Ok("cancelled")


def trace_ids(arguments: dict[str, Any]) -> Ok:
    """The trace and span id current in the worker: the call's span, propagated."""
    from opentelemetry import trace  # noqa: PLC0415

    context = trace.get_current_span().get_span_context()
    return Ok({"trace_id": format(context.trace_id, "032x"),
               "span_id": format(context.span_id, "016x")})


def dies_inside_a_step(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """The worker exits while the agent waits for its step's function."""
    ctx.durable_effects().run_json("charge", None, lambda _: os._exit(3))
    return Ok("unreachable")


_left_behind: list[Any] = []
_release = threading.Event()


def leaves_a_thread(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Starts a thread that uses this call's context only after the call has ended."""
    def later() -> None:
        _release.wait()
        try:
            _left_behind.append(ctx.state.get("city") if ctx.state else None)
        except Exception as exc:
            _left_behind.append(exc)
    thread = threading.Thread(target=later, daemon=True)
    _left_behind.append(thread)
    thread.start()
    return Ok("left a thread")


def what_the_thread_got(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """Lets the thread the previous call left behind go, and reports what it got."""
    thread = _left_behind.pop(0)
    _release.set()
    thread.join()
    got = _left_behind.pop(0)
    return Ok(getattr(got, "code", repr(got)))


def step_raises_os_error(arguments: dict[str, Any], ctx: CallContext) -> Ok:
    """A step whose function raises an ``OSError`` of its own (not the link's)."""
    def missing(_: Any) -> Any:
        return open(arguments["path"], encoding="utf-8").read()
    try:
        ctx.durable_effects().run_json("read", None, missing)
    except FileNotFoundError as exc:
        return Ok({"caught": type(exc).__name__})
    return Ok("unreachable")


def makes_spans(arguments: dict[str, Any]) -> Ok:
    """Spans of the handler's own, made in the worker with the global tracer."""
    from opentelemetry import trace  # noqa: PLC0415

    tracer = trace.get_tracer("tests.remote")
    with tracer.start_as_current_span("lookup", attributes={"table": "cities"}) as outer:
        outer.set_attribute("rows", 3)
        outer.add_event("cache_miss", {"key": "lyon"})
        with tracer.start_as_current_span("inner") as inner:
            inner.set_status(trace.StatusCode.ERROR, "slow")
            ids = format(inner.get_span_context().span_id, "016x")
    return Ok({"inner": ids, "pid": os.getpid()})
