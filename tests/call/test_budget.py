"""The output budget: what is kept, what the marker says, and what is never touched."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolvisor import function_tool, tool
from toolvisor.call import OutputBudget, OutputProjection
from toolvisor.call._budget import count_lines, keep_ends
from toolvisor.contract import Ok, OutputWindow

MARKER = re.compile(r"\.\.\.(\d+) (bytes|tokens|lines) truncated\.\.\.")

# Multi-byte characters of every UTF-8 length, newlines, and plain ASCII.
_pieces = st.text(
    alphabet=st.sampled_from(["a", "b", " ", "\n", "é", "€", "𝄞", "中", "\r"]),
    max_size=60,
)
# Short texts and long ones (a piece repeated), so every cap binds in some examples.
texts = st.one_of(
    _pieces,
    st.builds(lambda piece, times: piece * times, _pieces, st.integers(1, 80)),
)


@st.composite
def budgets(draw: st.DrawFn) -> OutputBudget:
    bytes_per_token = draw(st.integers(1, 4))
    return OutputBudget(
        max_bytes=draw(st.one_of(st.none(), st.integers(64, 200))),
        max_lines=draw(st.one_of(st.none(), st.integers(1, 40))),
        max_tokens=draw(st.one_of(st.none(), st.integers(-(-64 // bytes_per_token), 80))),
        bytes_per_token=bytes_per_token,
    )


windows: st.SearchStrategy[OutputWindow] = st.sampled_from(["head", "tail"])


def utf8_len(text: str) -> int:
    return len(text.encode())


def byte_cap(budget: OutputBudget) -> int | None:
    caps = [c for c in (budget.max_bytes,
                        budget.max_tokens and budget.max_tokens * budget.bytes_per_token) if c]
    return min(caps) if caps else None


@settings(max_examples=300, deadline=None)
@given(budget=budgets(), text=texts, window=windows)
def test_projection_properties(budget: OutputBudget, text: str, window: OutputWindow) -> None:
    out = budget.project(text, window=window)
    truncation = budget.truncate(text, window=window)
    if truncation is None:
        assert out is text
        return
    assert out == truncation.render()
    kept = truncation.kept
    # One end of the original is kept exactly, the marker on its own line at the other end.
    if window == "head":
        assert text.startswith(kept) and out.startswith(kept)
        assert out.endswith(truncation.marker)
    else:
        assert text.endswith(kept) and out.endswith(kept)
        assert out.startswith(truncation.marker)
    assert MARKER.fullmatch(truncation.marker)
    assert count_lines(out) == count_lines(kept) + 1
    # No broken UTF-8.
    assert out.encode().decode() == out
    # The output is within every cap, marker included.
    cap = byte_cap(budget)
    if cap is not None:
        assert utf8_len(out) <= cap
    if budget.max_lines is not None:
        assert count_lines(out) <= budget.max_lines
    # The marker's count is right for its unit.
    omitted = utf8_len(text) - utf8_len(kept)
    if truncation.unit == "bytes":
        assert truncation.count == omitted
    elif truncation.unit == "tokens":
        assert truncation.count == -(-omitted // budget.bytes_per_token)
    else:
        assert count_lines(kept) + truncation.count == count_lines(text)
        assert budget.max_lines is not None and count_lines(text) > budget.max_lines
    # A projected output fits, so projecting again changes nothing.
    assert budget.project(out, window=window) is out


@settings(max_examples=100, deadline=None)
@given(budget=budgets(), text=texts, window=windows)
def test_errors_are_never_truncated(budget: OutputBudget, text: str,
                                    window: OutputWindow) -> None:
    assert budget.project(text, window=window, is_error=True) is text


@settings(max_examples=300, deadline=None)
@given(text=texts, cap=st.integers(64, 200))
def test_keeping_the_ends_of_an_error(text: str, cap: int) -> None:
    kept = keep_ends(text, cap)
    assert utf8_len(kept) <= cap
    assert keep_ends(kept, cap) == kept  # a kept text fits: keeping again changes nothing
    if utf8_len(text) <= cap:
        assert kept is text
        return
    match = re.search(r"\n\.\.\.(\d+) bytes truncated\.\.\.\n", kept)
    assert match is not None
    head, tail = kept[:match.start()], kept[match.end():]
    assert text.startswith(head) and text.endswith(tail)
    assert utf8_len(head) + int(match.group(1)) + utf8_len(tail) == utf8_len(text)


def test_under_budget_is_the_same_object() -> None:
    text = "x" * 16384
    assert OutputBudget().project(text) is text
    lines = "line\n" * 400
    assert OutputBudget().project(lines) is lines


def test_byte_cap_keeps_the_head_with_a_bytes_marker() -> None:
    text = "a" * 20000
    truncation = OutputBudget().truncate(text)
    assert truncation is not None and truncation.unit == "bytes"
    assert truncation.count == 20000 - len(truncation.kept)
    out = OutputBudget().project(text)
    assert out.endswith(f"\n...{truncation.count} bytes truncated...")
    assert len(out) <= 16384


def test_tail_window_keeps_the_end() -> None:
    text = "".join(f"line {i}\n" for i in range(1000))
    out = OutputBudget().project(text, window="tail")
    assert out.startswith("...601 lines truncated...\n")
    assert out.endswith("line 999\n")
    assert count_lines(out) == 400


def test_line_cap_marker() -> None:
    assert OutputBudget(max_lines=3).project("a\nb\nc\nd\ne") == "a\nb\n...3 lines truncated..."
    assert OutputBudget(max_lines=2).project("\n\na") == "\n...2 lines truncated..."
    assert OutputBudget(max_lines=1).project("a\nb") == "...2 lines truncated..."


def test_token_cap_binds_when_tighter() -> None:
    truncation = OutputBudget(max_tokens=20, bytes_per_token=4).truncate("x" * 200)
    assert truncation is not None and truncation.unit == "tokens"
    assert truncation.count == -(-(200 - len(truncation.kept)) // 4)
    assert truncation.render().endswith(f"...{truncation.count} tokens truncated...")


def test_a_single_long_line_is_cut_on_a_character_boundary() -> None:
    text = "€" * 100  # 3 bytes each
    truncation = OutputBudget(max_bytes=64).truncate(text)
    assert truncation is not None
    assert truncation.kept and set(truncation.kept) == {"€"}
    assert utf8_len(truncation.render()) <= 64
    tail = OutputBudget(max_bytes=64).truncate("a" + text, window="tail")
    assert tail is not None and set(tail.kept) == {"€"}


def test_lone_surrogates_do_not_break_projection() -> None:
    text = "\ud800" * 100
    truncation = OutputBudget(max_bytes=64).truncate(text)
    assert truncation is not None and text.startswith(truncation.kept)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_bytes": 10}, "at least 64"),
        ({"max_bytes": 0}, "positive int"),
        ({"max_lines": True}, "positive int"),
        ({"max_tokens": 4, "bytes_per_token": 4}, "max_tokens \\* bytes_per_token"),
        ({"bytes_per_token": 0}, "positive int"),
    ],
)
def test_bad_budgets_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OutputBudget(**kwargs)  # type: ignore[arg-type]


def test_bad_window_is_refused() -> None:
    with pytest.raises(ValueError, match="'head' or 'tail'"):
        OutputBudget().project("x", window="middle")  # type: ignore[arg-type]


def test_projection_points() -> None:
    text = "x" * 20000
    projection = OutputProjection(at_request=True)
    assert projection.project("history", text) is text
    cut = projection.project("dispatch", text)
    assert cut != text
    # Applying at a second point after the first changes nothing.
    assert projection.project("request", cut) is cut
    with pytest.raises(ValueError, match="projection point"):
        projection.applies_at("later")  # type: ignore[arg-type]


def test_tools_declare_their_window() -> None:
    @function_tool(output_window="tail")
    def logs() -> str:
        """Read the logs."""
        return ""

    assert logs.output_window == "tail"
    with pytest.raises(ValueError, match="output_window"):
        tool(name="bad", output_window="middle")(  # type: ignore[call-overload]
            lambda arguments: Ok()
        )
