"""``isolation="sandbox"``: real bubblewrap sandboxes, and hostile handlers contained in them.

Each hostile handler gets the reason and code it should, and leaves nothing behind: the
runner is closed inside each test, and ``_nothing_left`` then finds no sandbox process and no
cgroup of this process (besides the plugin's check of threads and file descriptors).
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import sandbox_handlers as h
from toolvisor import Agent, CallContext, Err, Ok, Tool, ToolError
from toolvisor.contract import HandlerResult
from toolvisor.executor import ToolRunner
from toolvisor.machine import StateView
from toolvisor.testing import ScriptedModel, call, calls

pytestmark = pytest.mark.machine_wide  # the leak check looks at every sandbox of the machine

_CGROUPS = "/sys/fs/cgroup/pids"
ROOT = Path(__file__).resolve().parents[2]


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            return int(file.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _ours(pid: int) -> bool:
    """Whether ``pid`` descends from this test process (the suite may run on several at once,
    each with sandboxes of its own)."""
    me = os.getpid()
    while pid > 1:
        pid = _parent(pid)
        if pid == me:
            return True
    return False


def _sandbox_processes() -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as file:
                    cmdline = file.read()
            except OSError:
                continue
            if (b"_sandbox._child" in cmdline or cmdline == b"sleep\x00600\x00") \
                    and _ours(int(entry)):
                found.add(int(entry))
    return found


def _our_cgroups() -> list[str]:
    prefix = f"toolvisor-{os.getpid()}-"
    return [name for name in os.listdir(_CGROUPS) if name.startswith(prefix)]


@pytest.fixture(autouse=True)
def _nothing_left() -> Iterator[None]:
    before = _sandbox_processes()
    yield
    assert _sandbox_processes() - before == set()
    assert _our_cgroups() == []


@pytest.fixture
def runner() -> Iterator[ToolRunner]:
    with ToolRunner(tool_timeout=30.0, process_workers=1) as r:
        yield r


def sandboxed(handler: Any, timeout: float | None = None, **options: Any) -> Tool:
    """A sandboxed tool; its sandboxes are reused unless ``reuse=False`` (one start per test
    and policy: the policy is the same either way, and a start costs an interpreter's)."""
    options.setdefault("reuse", True)
    return Tool(name="boxed", handler=handler, isolation="sandbox", options=options,
                timeout=timeout)


def error_of(result: HandlerResult) -> ToolError:
    assert isinstance(result, Err) and isinstance(result.reason, ToolError), result
    return result.reason


def raised(result: HandlerResult) -> BaseException:
    error = error_of(result)
    assert error.reason == "handler_raised", error
    assert isinstance(error.cause, BaseException)
    return error.cause


def test_results_and_the_context_cross_the_link(runner: ToolRunner) -> None:
    ctx = CallContext(state=StateView({}))
    assert runner.run(sandboxed(h.echo), {"a": [1, 2]}) == Ok({"a": [1, 2]})
    assert runner.run(sandboxed(h.uses_context), {"value": 7}, ctx) == Ok(
        {"state": 7, "cwd": "/scratch"})
    assert ctx.state is not None and ctx.state.get("seen") == 7
    assert isinstance(raised(runner.run(sandboxed(h.raises_own), {})), LookupError)


def test_the_handler_cannot_leave_the_sandbox_or_lift_its_limits(runner: ToolRunner) -> None:
    result = runner.run(sandboxed(h.escape_attempts), {})
    assert result == Ok({"new_user_namespace": errno.ENOSPC,  # --disable-userns
                         "new_mount_namespace": errno.EPERM,  # no capabilities left
                         "mount_over_usr": errno.EPERM,
                         "remount_writable": errno.EPERM,
                         "raise_cpu_limit": "ValueError"}), result  # hard limit = soft limit


def test_the_sandbox_cannot_start_processes_of_the_run_outside_it() -> None:
    """``ctx.processes`` would run a function the sandbox names in the agent: not served."""
    model = ScriptedModel([calls(call("boxed", {}, id="c1")), "done"])
    with Agent(model, [sandboxed(h.starts_a_process)]) as agent:
        outcome = agent.run("go", wait_for=60)
    assert [m.content for m in outcome.messages if m.role == "tool"] == ["not_served"]


def test_the_sandbox_reads_the_catalog_but_cannot_widen_it() -> None:
    model = ScriptedModel([calls(call("boxed", {}, id="c1")), "done"])
    other = Tool(name="other", handler=h.echo)
    with Agent(model, [sandboxed(h.edits_the_catalog), other]) as agent:
        outcome = agent.run("go", wait_for=60)
    assert [m.content for m in outcome.messages if m.role == "tool"] == [
        '[["boxed","other"],"not_served","not_served"]']


def test_sandboxes_count_among_the_runners_workers(runner: ToolRunner) -> None:
    process = Tool(name="p", handler=h.echo, isolation="process")
    assert runner.run(process, {}) == runner.run(sandboxed(h.echo), {}) == Ok({})
    assert runner.stats.workers_alive == 2  # the process pool's one and the sandbox pool's


def test_what_is_not_plain_data_does_not_cross(runner: ToolRunner) -> None:
    error = error_of(runner.run(sandboxed(h.returns_object), {}))
    assert error.reason == "encoding_failed"
    assert error.cause == ("a message names tests.support.sandbox_handlers.Opaque, which may not"
                           " cross")
    error = error_of(runner.run(sandboxed(h.returns_a_bomb), {}))  # shares one list 2 ** 64 ways
    assert error.reason == "encoding_failed" and "more than 262144 values" in error.message


def test_only_the_allowed_environment_crosses(runner: ToolRunner,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-agent-secret")
    monkeypatch.setenv("REGION", "eu")
    result = runner.run(sandboxed(h.environment, env=["REGION", "NOT_SET"]), {})
    assert isinstance(result, Ok)
    # what Python needs, what bwrap's --chdir and Python's locale coercion set, and REGION
    assert sorted(result.value) == ["HOME", "LC_CTYPE", "PATH", "PWD", "PYTHONPATH", "REGION",
                                    "TMPDIR"]
    assert result.value["REGION"] == "eu"
    given = runner.run(sandboxed(h.environment, env={"MODE": "test"}), {})
    assert isinstance(given, Ok) and given.value["MODE"] == "test"
    # nor through /proc: the agent is not in the sandbox's pid namespace
    cause = raised(runner.run(sandboxed(h.agent_environment), {"pid": os.getpid()}))
    assert isinstance(cause, FileNotFoundError)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


def test_no_network_unless_the_tool_opts_in(runner: ToolRunner,
                                            listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    cause = raised(runner.run(sandboxed(h.connect), {"host": "127.0.0.1", "port": port}))
    assert isinstance(cause, ConnectionRefusedError)  # its own loopback, where nobody listens
    cause = raised(runner.run(sandboxed(h.connect), {"host": "192.0.2.1", "port": 80}))
    assert isinstance(cause, OSError) and cause.errno == 101  # ENETUNREACH: no route out
    received: list[bytes] = []

    def accept() -> None:
        peer, _ = listener.accept()
        with peer:
            received.append(peer.recv(5))

    thread = threading.Thread(target=accept)
    thread.start()
    opted_in = sandboxed(h.connect, network=True)
    assert runner.run(opted_in, {"host": "127.0.0.1", "port": port}) == Ok("connected")
    thread.join()
    assert received == [b"hello"]


def test_a_network_allow_list_opens_only_what_it_lists(runner: ToolRunner,
                                                       listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    received: list[bytes] = []

    def accept() -> None:
        peer, _ = listener.accept()
        with peer:
            received.append(peer.recv(5))

    thread = threading.Thread(target=accept)
    thread.start()
    listed = sandboxed(h.through_proxy, network=[f"127.0.0.1:{port}"])
    assert runner.run(listed, {"host": "127.0.0.1", "port": port}) == Ok(
        "HTTP/1.1 200 Connection established")
    thread.join()
    assert received == [b"hello"]
    assert runner.run(listed, {"host": "127.0.0.1", "port": 22}) == Ok("HTTP/1.1 403 Forbidden")
    cause = raised(runner.run(sandboxed(h.connect, network=[f"127.0.0.1:{port}"]),
                              {"host": "127.0.0.1", "port": port}))
    assert isinstance(cause, ConnectionRefusedError)  # only through the proxy
    # the agent serves a sandbox's tunnels on threads: only so many at once
    many = sandboxed(h.many_tunnels, network=[f"127.0.0.1:{port}"], open_files=256)
    assert runner.run(many, {"count": 36}) == Ok("HTTP/1.1 503 Service Unavailable")


def test_the_filesystem_is_read_only_but_for_scratch(runner: ToolRunner,
                                                     tmp_path: Path) -> None:
    outside = tmp_path / "written"
    cause = raised(runner.run(sandboxed(h.write), {"path": str(outside)}))
    assert isinstance(cause, FileNotFoundError)  # the agent's files are not even there
    cause = raised(runner.run(sandboxed(h.write), {"path": h.__file__}))
    assert isinstance(cause, OSError) and cause.errno == 30  # EROFS: the tool's own module
    assert not outside.exists()
    assert runner.run(sandboxed(h.write), {"path": "note"}) == Ok("/scratch/note")


def test_only_the_allowed_paths_can_be_read(runner: ToolRunner, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the agent's")
    for path in (str(secret), "/etc/passwd", os.path.expanduser("~/.bashrc")):
        assert isinstance(raised(runner.run(sandboxed(h.read), {"path": path})),
                          FileNotFoundError), path
    allowed = sandboxed(h.read, read_only=[str(tmp_path)])
    assert runner.run(allowed, {"path": str(secret)}) == Ok("the agent's")


def test_each_call_gets_a_fresh_sandbox_unless_reused(runner: ToolRunner) -> None:
    fresh = sandboxed(h.scratch_left, reuse=False)
    assert runner.run(fresh, {}) == runner.run(fresh, {}) == Ok([])
    reused = sandboxed(h.scratch_left, reuse=True)
    assert runner.run(reused, {}) == Ok([])
    assert runner.run(reused, {}) == Ok(["left-behind"])  # what reuse means


@pytest.mark.parametrize(("handler", "options", "code"), [
    (h.memory_bomb, {"memory": 256 << 20, "reuse": False}, "memory_limit"),
    (h.cpu_spin, {"cpu_seconds": 1}, "cpu_limit"),
    (h.big_file, {"file_size": 1 << 20}, "file_size_limit"),
    (h.many_files, {"open_files": 32}, "open_files_limit"),
    (h.fork_storm, {"processes": 8}, "process_limit"),
])
def test_a_broken_limit_ends_the_sandbox(runner: ToolRunner, handler: Any,
                                         options: dict[str, int], code: str) -> None:
    error = error_of(runner.run(sandboxed(handler, **options), {}))
    assert (error.reason, error.code) == ("handler_exit", code), error


def test_a_hung_sandbox_dies_at_its_deadline_with_its_children(runner: ToolRunner) -> None:
    result = runner.run(sandboxed(h.hang_with_children, timeout=1.0), {})
    assert error_of(result).reason == "timeout"
    # the pool's one sandbox was killed and replaced: the next call of its policy runs
    assert runner.run(sandboxed(h.echo, timeout=1.0), {"n": 1}) == Ok({"n": 1})
    assert runner.stats.workers_killed == 1


def test_a_handler_that_closes_its_link(runner: ToolRunner) -> None:
    error = error_of(runner.run(sandboxed(h.close_link), {}, CallContext(state=StateView({}))))
    assert (error.reason, error.cause) == ("handler_exit", 1)  # it could not send its result


@pytest.mark.parametrize("handler", [h.flood_link, h.forged_pickle, h.forged_bomb])
def test_a_handler_that_floods_or_forges_on_its_link(runner: ToolRunner, handler: Any,
                                                     tmp_path: Path) -> None:
    proof = tmp_path / "ran-in-the-agent"
    error = error_of(runner.run(sandboxed(handler), {"path": str(proof)}))
    assert (error.reason, error.code) == ("handler_exit", "link_violation"), error
    assert not proof.exists()


@pytest.mark.parametrize(("options", "message"), [
    ({"network": "yes"}, "'network' must be True, False or a list of \"host:port\""),
    ({"network": ["example.com"]}, "got 'example.com'"),
    ({"memory": 1024}, "'memory' must be an int >= 67108864"),
    ({"read_only": "/etc"}, "'read_only' must be a list of absolute paths"),
    ({"read_only": ["relative"]}, "'read_only' takes absolute paths"),
    ({"read_only": ["/no/such/path"]}, "'/no/such/path' does not exist"),
    ({"env": "HOME"}, "'env' must be a list of variable names"),
    ({"env": {"A": 1}}, "'env' 'A' must map to a str"),
    ({"gpu": True}, "has no option 'gpu'"),
])
def test_options_are_checked_when_the_tool_is_built(options: dict[str, Any],
                                                     message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sandboxed(h.echo, **options)


_SCRIPT = """
from toolvisor import Ok, Tool

def handler(arguments):
    return Ok(None)

try:
    Tool(name="boxed", handler=handler, isolation="sandbox")
except ValueError as exc:
    print(exc)
"""


def test_a_handler_in_a_script_run_by_path_is_refused(tmp_path: Path) -> None:
    """A sandbox imports the handler by module; a script run by its path has no module name
    there (one run with ``python -m`` has: see examples/sandbox.py)."""
    script = tmp_path / "script.py"
    script.write_text(_SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "define the handler in a module the program imports, or run the program with " \
        "`python -m`" in done.stdout, done


def elsewhere(arguments: dict[str, Any]) -> Ok:
    return Ok(None)


elsewhere.__module__ = "no_such_module_here"


def test_a_handler_whose_module_cannot_be_imported_is_not_found(runner: ToolRunner) -> None:
    error = error_of(runner.run(sandboxed(elsewhere), {}))
    assert error.reason == "not_found" and "no_such_module_here" in error.message


def test_no_bwrap_is_the_agents_error_naming_the_package(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="install the `bubblewrap` package"):
        Agent(ScriptedModel(["done"]), [sandboxed(h.echo)])


def test_a_program_run_with_dash_m_has_its_own_handlers_sandboxed() -> None:
    """``python -m examples.sandbox`` defines ``python_exec`` in its ``__main__``: the sandbox
    imports that module as its own ``__main__`` and finds it there."""
    done = subprocess.run([sys.executable, "-m", "examples.sandbox"], capture_output=True,
                          text=True, check=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk-x"})
    lines = done.stdout.splitlines()
    assert lines[0] == 'call_1: {"exit_code":0,"stdout":"45\\n","stderr":""}', done
    assert lines[1] == 'call_2: {"exit_code":0,"stdout":"None\\n","stderr":""}'
    assert "FileNotFoundError" in lines[2]
