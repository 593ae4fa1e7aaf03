"""`tito demo`'s script end to end (on the instant engine here; the CLI runs it on the local model)."""

from __future__ import annotations

import pytest

from tito.server.demo import run_demo


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
