"""``SupervisedActor``: a pykka actor that tells its supervisor, exactly once, how it ended.

pykka has no links or monitors. This mixin adds the one fact supervision needs: when an actor's
life ends, whatever ended it, its parent hears about it once, with the exit reason.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal

import pykka
from pykka import ActorDeadError, ActorRef, ActorRegistry

from toolvisor._one_shot import OneShotEvent
from toolvisor.contract import ToolvisorError

if TYPE_CHECKING:
    from types import TracebackType

ExitReason = Literal["normal", "shutdown"] | BaseException
"""Why an actor ended: ``"normal"`` (it stopped itself or was stopped by someone other than
its supervisor), ``"shutdown"`` (its supervisor stopped it) or the exception that killed it."""

NORMAL_REASONS: Final = ("normal", "shutdown")


def describe(reason: ExitReason) -> str:
    """The exit reason as text for log events."""
    return reason if isinstance(reason, str) else repr(reason)


class ActorExit(ToolvisorError):
    """What an ``ask`` caller gets when the handler ended the actor with a ``BaseException``.

    The actor itself ends with the original ``BaseException`` (``__cause__``) as its reason.
    """


class StartAck:
    """OTP's init acknowledgement: settled once, by the actor's thread, when ``on_start`` has
    returned (``error`` ``None``) or raised (``error`` is what it raised). Whoever waits reads
    ``error`` only after ``done`` is set."""

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None

    def settle(self, error: BaseException | None) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()


class ChildLink:
    """The tie between one child and its supervisor, made before the child is constructed.

    The child's constructor claims the link (``actor``) and its ``start_ack``, if the starter
    set one to wait for ``on_start``; the child's thread later writes ``reason``, calls the
    supervisor's ``notify`` and only then sets ``exited``. The supervisor reads ``reason`` only
    after ``exited`` is set, or in the handler ``notify`` led to.
    """

    __slots__ = ("_notify", "actor", "exited", "reason", "start_ack")

    def __init__(self, notify: Callable[[ChildLink], None], *,
                 start_ack: StartAck | None = None) -> None:
        self._notify = notify
        self.actor: SupervisedActor | None = None
        self.reason: ExitReason = "normal"
        self.exited = OneShotEvent()
        self.start_ack = start_ack

    def child_exited(self, reason: ExitReason) -> None:
        """Record the reason, tell the supervisor, then wake anyone waiting for the exit."""
        self.reason = reason
        try:
            self._notify(self)
        finally:
            self.exited.set()


_pending = threading.local()  # .link: the ChildLink the next SupervisedActor built here claims


def start_linked(link: ChildLink, start: Callable[[], ActorRef[Any]]) -> ActorRef[Any]:
    """Call ``start`` here so that the first ``SupervisedActor`` it builds claims ``link``.

    Raises ``TypeError`` if ``start`` returns anything but the ref of that actor (any actor it
    did start is then stopped); whatever ``start`` raises propagates.
    """
    previous = getattr(_pending, "link", None)
    _pending.link = link
    try:
        ref = start()
    except BaseException:
        if link.actor is not None:
            request_shutdown(link.actor.actor_ref)
        raise
    finally:
        _pending.link = previous
    linked = link.actor
    if isinstance(ref, ActorRef) and linked is not None and ref.actor_urn == linked.actor_urn:
        return ref
    if linked is not None:
        request_shutdown(linked.actor_ref)
    if isinstance(ref, ActorRef):
        ref.stop(block=False)
    what = "ref of a different actor" if linked is not None else repr(ref)
    raise TypeError(
        f"the start function must return the ActorRef of the SupervisedActor it starts "
        f"(e.g. `lambda: MyActor.start(...)` where MyActor subclasses SupervisedActor), "
        f"got {what}"
    )


class ShutdownRequest:
    """The message a supervisor sends to stop a child; the child then exits with ``shutdown``.

    Public because an actor whose mailbox acts on a stop before the actor reads its mail (a
    call actor running its handler on its own thread) must know it when it sees it."""

    __slots__ = ()


_SHUTDOWN: Final = ShutdownRequest()


def request_shutdown(ref: ActorRef[Any]) -> None:
    """Ask a ``SupervisedActor`` to stop with reason ``shutdown`` (after its queued messages)."""
    with contextlib.suppress(ActorDeadError):
        ref.tell(_SHUTDOWN)


class SupervisedActor(pykka.Actor):
    """A mixin for any pykka actor type: ``class Worker(SupervisedActor, pykka.ThreadingActor)``.

    Guarantee: if this actor was constructed while its supervisor was starting it (inside a
    child spec's start function), the supervisor is told exactly once that it ended, after its
    loop has ended and its pending asks have been answered, with the reason:

    * ``"normal"``: stopped by ``stop()`` / ``ActorRef.stop()``, by itself or by anyone but the
      supervisor;
    * ``"shutdown"``: stopped by its supervisor;
    * the exception: raised by ``on_start``, by ``on_stop``, or by a handler of a ``tell``
      (an ``ask`` that raises only fails that ask, as in pykka). The first cause wins.

    A ``BaseException`` that is not an ``Exception`` (``SystemExit``, ...) ends this actor alone
    with that exception as its reason, instead of pykka's ``ActorRegistry.stop_all()``; an
    ``ask`` caller gets :class:`ActorExit`.

    When its ``on_start`` has returned or raised, it settles its start acknowledgement (if its
    starter asked for one through the link): that is how a ``Supervisor`` starts a child only
    once the one before it is ready, as OTP's synchronous ``start_link`` does.

    An actor type whose loop does not run ``_actor_loop`` must call ``_report_exit()`` from its
    loop's thread when the loop ends (and ``_acknowledge_start`` after its ``on_start``). An
    actor built outside a start function is unsupervised and reports to no one.
    """

    _link: ChildLink | None = None
    _start_ack: StartAck | None = None
    _exit_reason: ExitReason | None = None  # the first recorded cause; written by own thread

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._exit_unreported = {0: None}  # popped by the one report (a dict's pop is atomic;
        # a dict of atoms, unlike a lock, is no object the collector tracks)
        link: ChildLink | None = getattr(_pending, "link", None)
        if link is not None and link.actor is None:
            link.actor = self
            self._link = link
            self._start_ack = link.start_ack
            _pending.link = None

    def on_abandon(self) -> None:
        """Called when the supervisor gives up waiting for this actor to stop.

        Runs in the SUPERVISOR's thread, since this actor's thread is stuck: keep it quick and
        thread-safe (e.g. set a cancellation event). Exceptions are logged and ignored.
        """

    def _record_exit_reason(self, reason: ExitReason) -> None:
        if self._exit_reason is None:
            self._exit_reason = reason

    def _current_exit_reason(self) -> ExitReason:
        return "normal" if self._exit_reason is None else self._exit_reason

    def _report_exit(self) -> None:
        """Tell the supervisor how this actor ended; later calls do nothing. The actor then
        lets go of its link (the link keeps the actor: a cycle the garbage collector would
        have to find, for every call)."""
        try:
            self._exit_unreported.popitem()
        except KeyError:
            return  # reported already
        link, self._link = self._link, None
        if link is not None:
            link.child_exited(self._current_exit_reason())

    @property
    def _exit_reported(self) -> bool:
        """Whether the exit was reported (or is being reported)."""
        return not self._exit_unreported

    def _die(self, reason: BaseException) -> None:
        """End the actor with ``reason`` without running ``on_stop`` (like a crash in pykka)."""
        self._record_exit_reason(reason)
        ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()

    def _acknowledge_start(self, error: BaseException | None) -> None:
        """Settle the start acknowledgement, if anyone waits for it."""
        ack = self._start_ack
        if ack is not None:
            ack.settle(error)

    def _actor_loop_setup(self) -> None:
        try:
            super()._actor_loop_setup()  # on_start; pykka records an Exception as a failure
        except BaseException as exc:
            self._acknowledge_start(exc)
            raise
        failed = self._exit_reason
        self._acknowledge_start(failed if isinstance(failed, BaseException) else None)

    def _actor_loop(self) -> None:
        try:
            super()._actor_loop()
        except BaseException as exc:  # the reason goes to the supervisor
            self._die(exc)
            self._actor_loop_teardown()
        finally:
            if self.actor_stopped.is_set():  # else a loop run in slices only ran out of mail
                self._report_exit()

    def _handle_receive(self, message: Any) -> Any:
        if isinstance(message, ShutdownRequest):
            self._record_exit_reason("shutdown")
            return self._stop()
        try:
            return super()._handle_receive(message)
        except Exception:
            raise
        except BaseException as exc:
            self._die(exc)
            raise ActorExit(f"{self} exited with {exc!r}") from exc

    def _handle_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exception_value is not None:  # after an ActorExit, its cause is already recorded
            self._record_exit_reason(exception_value)
        super()._handle_failure(exception_type, exception_value, traceback)
