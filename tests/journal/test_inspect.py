"""`tito journal inspect DIR`: sessions, turns and token counts, text or JSON; exit 1 and the place on damage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.journal.events import created, turn
from tito.cli import main
from tito.journal.segments import list_segments
from tito.journal.writer import FsyncPolicy, JournalWriter
from tito.trajectory.events import SessionDeleted


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    with JournalWriter(tmp_path, FsyncPolicy.NEVER) as writer:
        for event in (created("a"), turn("a", 0, prompt_len=30, output_len=7), created("b"), turn("b", 0)):
            writer.append_blocking(event)
        writer.append_blocking(SessionDeleted(session_id="b", at=3000.0))
    return tmp_path


def test_inspect_json_lists_sessions_with_status_and_token_counts(
    journal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["journal", "inspect", str(journal), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["records"] == 5 and summary["damage"] is None
    a, b = summary["sessions"]
    assert (a["session_id"], a["status"], b["status"]) == ("a", "live", "deleted")
    assert a["turns"] == [
        {"node_id": 0, "parent_id": None, "prompt_ids": 30, "output_ids": 7, "finish_reason": "stop", "at": 1001.0}
    ]


def test_inspect_text_prints_one_line_per_session_and_turn(journal: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["journal", "inspect", str(journal)]) == 0
    out = capsys.readouterr().out
    assert "5 records, 2 session(s)" in out and "a  live" in out and "output 7" in out


def test_inspect_of_a_damaged_journal_exits_1_and_says_where(journal: Path, capsys: pytest.CaptureFixture[str]) -> None:
    segment = list_segments(journal)[0]
    segment.write_bytes(segment.read_bytes()[:-2])
    assert main(["journal", "inspect", str(journal), "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["records"] == 4
    assert f"damaged: {segment} at byte" in captured.err


def test_inspect_of_a_missing_directory_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["journal", "inspect", str(tmp_path / "nope")]) == 1
    assert "JournalError: no journal directory at" in capsys.readouterr().err
