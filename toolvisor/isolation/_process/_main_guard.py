"""Whether worker processes started now would run the program a second time.

A ``spawn`` or ``forkserver`` worker (the start methods ``process`` isolation uses) imports the
program's ``__main__`` again, as ``__mp_main__``, before it runs anything: every line of the
script outside ``if __name__ == "__main__":`` runs once more in each worker. In a script that
builds and runs its agent at top level, every worker would run that agent (its model calls
included), and multiprocessing's own refusal inside it would come back as a tool result. So
toolvisor refuses first, in the caller's thread, with an error that shows the guard.

The program is judged where it stands: the main thread's top-level frame of ``__main__`` and
the statement it is at. A program that ran from ``-c``, stdin, a REPL or ``python -m pkg``
(a package's ``__main__``) is never imported again, as multiprocessing decides.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
import threading
import tokenize
from collections.abc import Callable, Collection
from types import FrameType

GUARD_EXAMPLE = 'if __name__ == "__main__":\n    main()  # what builds and runs the agent'


def reimported_main() -> str | None:
    """The file a worker process runs again as ``__mp_main__``, or ``None`` when it runs none.

    The same rule as ``multiprocessing.spawn.get_preparation_data``: a ``__main__`` module
    named ``__main__`` or ``pkg.__main__`` is left alone, any other one with a file is re-run.
    """
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if isinstance(name, str) and (name == "__main__" or name.endswith(".__main__")):
        return None
    path = getattr(main, "__file__", None)
    if not isinstance(path, str) or os.path.splitext(os.path.basename(path))[0] == "ipython":
        return None
    return path


def _is_main_test(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = (test.left, test.comparators[0])
    return any(isinstance(a, ast.Name) and a.id == "__name__" and isinstance(b, ast.Constant)
               and b.value == "__main__" for a, b in (sides, sides[::-1]))


def guarded_lines(source: str) -> tuple[range, ...]:
    """The lines of ``source`` in the body of an ``if __name__ == "__main__":`` reached from
    the top level (inside any compound statement, not inside a function or class)."""
    found: list[range] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if isinstance(child, ast.If) and _is_main_test(child.test):
                end = child.body[-1].end_lineno or child.body[-1].lineno
                found.append(range(child.body[0].lineno, end + 1))
                for other in child.orelse:
                    visit(other)
                continue
            visit(child)

    visit(ast.parse(source))
    return tuple(found)


@functools.lru_cache(maxsize=8)
def _guarded_lines_of(path: str) -> tuple[range, ...] | None:
    """:func:`guarded_lines` of the file, or ``None`` when it cannot be read or parsed."""
    try:
        with tokenize.open(path) as file:
            return guarded_lines(file.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None


def _top_level_frame() -> FrameType | None:
    """The main thread's frame running ``__main__``'s top-level code, if it runs now."""
    main = sys.modules.get("__main__")
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is getattr(main, "__dict__",
                                                                             None):
            return frame
        frame = frame.f_back
    return None


def unguarded_main() -> str | None:
    """Why a worker process started now would run this program's code again, or ``None``.

    That is when ``__main__`` is re-run in workers (:func:`reimported_main`) and the main thread
    is at a top-level statement outside the guard, or, once the top level has ended, when the
    file has no guard at all. A file that cannot be read is given the benefit of the doubt.
    """
    path = reimported_main()
    if path is None:
        return None
    guarded = _guarded_lines_of(path)
    if guarded is None:
        return None
    frame = _top_level_frame()
    if frame is None:
        if guarded:
            return None
        return (f"the program's top level has ended and {path} has no "
                f'`if __name__ == "__main__":` block')
    line = frame.f_lineno
    if any(line in lines for lines in guarded):
        return None
    return f'the line it runs now ({path}:{line}) is not under `if __name__ == "__main__":`'


def check_main_guard(process_tools: Callable[[], Collection[str]]) -> None:
    """Raise ``RuntimeError`` (showing the guard) if worker processes started now would run
    this program a second time and ``process_tools()`` names a tool that needs them.

    ``process_tools`` is asked first (a registry's answer is read once per catalog change): an
    agent without such tools, the common case, never looks at the main thread's frames, which
    costs a frame object for every frame of that thread's stack, on every run's start.
    """
    names = sorted(process_tools())
    if not names:
        return
    why = unguarded_main()
    if why is None:
        return
    indented = GUARD_EXAMPLE.replace("\n", "\n    ")
    raise RuntimeError(
        f"isolation='process' (tools {names}) cannot start worker processes here: each worker "
        f"imports this program again, and {why}, so every worker would run it a second time "
        f"(the agent, its model calls). Put the code that runs the agent under the guard:\n\n"
        f"    {indented}\n"
    )
