"""The live view draws immutable snapshots pushed from the event loop."""

from __future__ import annotations

import io
import sys
import threading

import pytest
from rich.console import Console

from deep_research.core.models import ResearchNode, SessionState
from deep_research.core.ports import JobEvent
from deep_research.frontends import render
from deep_research.frontends.render import LiveView


def draw(view: LiveView) -> str:
    console = Console(width=160, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(view)
    text = console.export_text()
    console.file.close()
    return text


def test_the_view_draws_the_last_pushed_frame_not_the_live_state() -> None:
    state = SessionState(session_id="s1", question="q?")
    state.nodes["n1"] = ResearchNode(id="n1", question="First sub-question")
    view = LiveView(state)
    view.event("started n1")

    state.nodes["n2"] = ResearchNode(id="n2", question="Added after the frame")
    state.nodes["n1"].status = "done"
    drawn = draw(view)
    assert "First sub-question" in drawn
    assert "pending" in drawn
    assert "Added after the frame" not in drawn, "changes reach the view only with an event"

    view.event("done n1")
    drawn = draw(view)
    assert "Added after the frame" in drawn
    assert "done" in drawn
    assert "done n1" in drawn


def test_drawing_from_another_thread_never_sees_a_state_being_changed() -> None:
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show at once
    state = SessionState(session_id="s1", question="q?")
    view = LiveView(state, max_events=50)
    failures: list[BaseException] = []
    stop = threading.Event()

    def redraw() -> None:
        while not stop.is_set():
            try:
                draw(view)
            except BaseException as exc:  # what rich's refresh thread would die of
                failures.append(exc)
                return

    thread = threading.Thread(target=redraw)
    thread.start()
    try:
        for i in range(3000):
            if i % 50 == 0:
                state.nodes[f"n{i}"] = ResearchNode(id=f"n{i}", question=f"question {i}")
            view.event(f"started n{i}")
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(previous)
    assert not failures


def test_questions_errors_and_notes_are_shown_as_written_never_as_markup() -> None:
    """A model's ``[link=…]`` would be a hidden link in the terminal, and an unmatched
    ``[/x]`` in an error stopped the run's display with a MarkupError."""
    from deep_research.frontends import render

    state = SessionState(session_id="s1", question="q?")
    state.nodes["n1"] = ResearchNode(
        id="n1", question="See [link=https://phish.example]NIST[/link] [bold]now[/bold]"
    )
    state.nodes["n2"] = ResearchNode(
        id="n2", question="Paths", status="failed", error="no such file [/etc/x]"
    )
    console = Console(width=200, record=True, force_terminal=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(render.node_table(state.nodes.values(), {}, {}))
    assert 'href="https://phish' not in console.export_html(clear=False)
    drawn = console.export_text()
    assert "See [link=https://phish.example]NIST[/link] [bold]now[/bold]" in drawn
    assert "Paths (no such file [/etc/x])" in drawn

    shown = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    render.err, saved = shown, render.err
    try:
        render.Progress()("n2: page [/etc/x] read: [link=https://phish.example]x[/link]")
    finally:
        render.err = saved
    assert "n2: page [/etc/x] read: [link=https://phish.example]x[/link]" in shown.export_text()


def test_a_jobs_age_ticks_between_polls_and_one_poll_is_singular(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(render.time, "monotonic", lambda: clock[0])
    state = SessionState(session_id="s1", question="q?")
    state.nodes["w1"] = ResearchNode(id="w1", question="A web question", status="running")
    view = LiveView(state)
    view.event(JobEvent("w1", "resp_1", "gpt-5.5", "in_progress", polls=1, elapsed_seconds=5))
    assert "in_progress 5s · 1 poll" in draw(view)
    clock[0] += 62  # no poll for a minute: the job is still visibly alive
    assert "in_progress 1m07s · 1 poll" in draw(view)
    view.event(JobEvent("w1", "resp_1", "gpt-5.5", "in_progress", polls=2, elapsed_seconds=70))
    assert "in_progress 1m10s · 2 polls" in draw(view)


def test_the_last_frame_shows_the_final_state(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = Console(file=io.StringIO(), record=True, width=160, force_terminal=True)
    monkeypatch.setattr(render, "err", screen)
    state = SessionState(session_id="s1", question="q?")
    state.nodes["n1"] = ResearchNode(id="n1", question="First sub-question")
    with render.live_view(state, enabled=True) as view:
        view.event("started n1")
        state.nodes["n1"].status = "done"  # the run ends with no event after this change
    drawn = screen.export_text()
    last = drawn[drawn.rindex("deep-research s1") :]  # the frame drawn last
    assert "done" in last
    assert "pending" not in last
