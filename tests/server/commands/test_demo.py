"""`tito demo`'s script end to end (on the instant engine here; the CLI runs it on the local model)."""

from __future__ import annotations

import pytest

from tito.server.commands.demo import run_demo


def test_the_demo_drives_every_step_and_shows_the_sample_and_the_serve_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_demo(engine="instant", family="qwen3") == 0
    shown = capsys.readouterr().out
    for step in ("user question", "follow-up", "mid-session system message", "injected assistant"):
        assert step in shown
    assert "Summary so far" in shown  # the injected assistant is in the conversation table
    assert "status completed" in shown and "reward 1.0" in shown
    assert "tito serve --engine local" in shown


def test_a_reply_cut_by_the_limit_ends_the_conversation_with_a_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_demo(engine="instant", family="qwen3", max_tokens=1) == 0
    shown = capsys.readouterr().out
    assert "user question: the reply reached max_tokens=1" in shown and "conversation" in shown
    assert "follow-up" not in shown  # no request extends the cut turn (it would be a 409)
    assert "status truncated" in shown  # the sample is still shown, marked as cut
