"""`tito journal export`: the samples of ended sessions, from the journal alone, equal the server's `/samples` reply
bit for bit; which sessions count as ended; a damaged journal exports what precedes the damage and says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.journal.events import LEGACY_HUGE, turn, write_legacy_journal
from tests.server.conftest import running_server
from tests.server.journal_agent import Agent
from tests.server.turns.test_completions import converse
from tito.cli import main
from tito.journal.segments import list_segments
from tito.journal.writer import FsyncPolicy, JournalWriter
from tito.tokenizer_loading import LocalTokenizer
from tito.trajectory.events import SamplesTaken, SessionConfig, SessionCreated, TrajectoryKind
from tito.trajectory.exports import PROJECTIONS


@pytest.fixture(scope="module")
def journal(qwen3_tokenizer: LocalTokenizer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """A journal with a sampled, a deleted, an idle-expired and a live session; the server's replies to `/samples`
    for the sampled one (safetensors, then JSON)."""
    directory = tmp_path_factory.mktemp("journal")
    with running_server(qwen3_tokenizer, journal=directory) as server:
        agents = {name: Agent(index) for index, name in enumerate(("sampled", "deleted", "live"))}
        for agent in agents.values():
            agent.open(server.http)
            for _ in range(3):
                agent.turn(server.http)
        url = f"/sessions/{agents['sampled'].session_id}/samples"
        replies = {
            "safetensors": server.http.post(url, params={"format": "safetensors"}).content,
            "json": server.http.post(url).content,
        }
        assert server.http.delete(f"/sessions/{agents['deleted'].session_id}").status_code == 204
    return directory, {**replies, **{name: agent.session_id.encode() for name, agent in agents.items()}}


NEEDS_REWARD = ("areal", "nemo_gym")
"""Formats whose trainers train on a reward: a sample without one is refused (tito.trajectory.exports)."""


def export(directory: Path, out: Path, *flags: str) -> tuple[int, bytes]:
    code = main(["journal", "export", str(directory), "--out", str(out), *flags])
    return code, out.read_bytes()


def exported_sessions(jsonl: bytes) -> list[str]:
    return [orjson.loads(line)["metadata"]["session_id"] for line in jsonl.splitlines()]


def test_an_export_equals_the_servers_samples_reply_bit_for_bit(
    journal: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    directory, facts = journal
    code, jsonl = export(directory, tmp_path / "all.jsonl")
    assert code == 0
    assert exported_sessions(jsonl) == [facts["sampled"].decode(), facts["deleted"].decode()]
    (sampled_line, _) = jsonl.splitlines()
    (served,) = orjson.loads(facts["json"])["samples"]
    assert sampled_line == orjson.dumps(served)
    code, container = export(
        directory, tmp_path / "out.safetensors", "--format", "safetensors", "--session", facts["sampled"].decode()
    )
    assert code == 0 and container == facts["safetensors"]


def test_all_adds_the_live_sessions(journal: tuple[Path, dict[str, bytes]], tmp_path: Path) -> None:
    directory, facts = journal
    code, jsonl = export(directory, tmp_path / "all.jsonl", "--all")
    assert code == 0
    assert exported_sessions(jsonl) == [facts[name].decode() for name in ("sampled", "deleted", "live")]


def test_a_damaged_journal_exports_what_precedes_the_damage_and_exits_1(
    journal: tuple[Path, dict[str, bytes]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, facts = journal
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (segment,) = list_segments(source)
    (damaged / segment.name).write_bytes(segment.read_bytes()[:-9])  # the deletion record torn
    code, jsonl = export(damaged, tmp_path / "out.jsonl")
    assert code == 1 and "damaged" in capsys.readouterr().err
    assert exported_sessions(jsonl) == [facts["sampled"].decode()]


@pytest.mark.parametrize("format", ["verl", "skyrl", "prime-rl", "trl", "miles"])
def test_a_trainer_format_export_equals_the_servers_reply_in_that_format_and_keeps_the_group(
    qwen3_tokenizer: LocalTokenizer, tmp_path: Path, format: str
) -> None:
    with running_server(qwen3_tokenizer, journal=tmp_path / "journal") as server:
        session_id = server.new_session(group_id="prompt-9")
        converse(server, session_id, [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]])
        reply = server.http.post(f"/sessions/{session_id}/samples", json={"format": format}).json()
    assert reply["format"] == format and reply["upstream"] == PROJECTIONS[format].upstream
    code, document = export(tmp_path / "journal", tmp_path / "out.json", "--format", format, "--session", session_id)
    assert code == 0 and orjson.loads(document) == reply["samples"]
    (sample,) = PROJECTIONS[format].restore(reply["samples"])
    assert sample.group_id == "prompt-9" and len(sample.spans) == 2


def test_a_journal_written_before_range_checks_exports_every_session_and_names_the_odd_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    poisoned, plain = write_legacy_journal(tmp_path / "journal")
    for format in ("jsonl", *PROJECTIONS, "safetensors"):
        if format in NEEDS_REWARD:  # the legacy sessions were sampled without a reward: refused, naming the session
            assert main(["journal", "export", str(tmp_path / "journal"), "--format", format]) != 0
            assert "sample has no reward" in capsys.readouterr().err
            continue
        code, payload = export(tmp_path / "journal", tmp_path / f"out.{format}", "--format", format)
        assert code == 0, format
        assert payload
        assert f"session {poisoned}: exported with a value 64-bit JSON readers refuse" in capsys.readouterr().err
    _, jsonl = export(tmp_path / "journal", tmp_path / "out.jsonl")
    samples = {line["metadata"]["session_id"]: line for line in map(json.loads, jsonl.splitlines())}
    assert set(samples) == {poisoned, plain}
    assert samples[poisoned]["spans"][0]["sampling"]["seed"] == LEGACY_HUGE  # written exactly as stored


def test_a_session_that_cannot_become_samples_is_reported_and_the_others_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A session whose sample hook this machine cannot import (written by another deployment) is left out."""
    directory = tmp_path / "journal"
    _, plain = write_legacy_journal(directory)
    hooked = SessionConfig(trajectory=TrajectoryKind.TREE, sample_postprocessor="absent_package.hooks:post")
    with JournalWriter(directory, FsyncPolicy.NEVER) as writer:
        for event in (SessionCreated("hooked", hooked, 1000.0), turn("hooked", 0), SamplesTaken("hooked", 2000.0)):
            writer.append_blocking(event)
    code, jsonl = export(directory, tmp_path / "out.jsonl")
    assert code == 1
    assert plain in exported_sessions(jsonl) and "hooked" not in exported_sessions(jsonl)
    assert "session hooked: not exported: ConfigurationError" in capsys.readouterr().err


def sample_as_asked(server: Any, session_id: str, format: str) -> list[Any] | dict[str, Any]:
    """`/samples` with a reward per response id, a group, metadata and budgets that keep two of the three turns."""
    (whole,) = server.http.post(f"/sessions/{session_id}/samples").json()["samples"]
    first, second = whole["spans"][:2]
    asked = {"reward": 0.5, "rewards": {second["response_id"]: 1.0}, "group_id": "g-7", "max_seq_len": 4096,
             "prompt_length": first["start"], "response_length": second["end"] - first["start"],
             "metadata": {"task": "t"}, "format": format}  # fmt: skip
    reply = server.http.post(f"/sessions/{session_id}/samples", json=asked)
    assert reply.status_code == 200, reply.text
    samples: list[Any] | dict[str, Any] = reply.json()["samples"]
    return samples


@pytest.mark.parametrize("restarted", [False, True], ids=["live", "restarted"])
@pytest.mark.parametrize("format", ["json", "verl", "skyrl"])
def test_an_export_replays_what_samples_was_given_rewards_group_and_budgets(
    qwen3_tokenizer: LocalTokenizer, tmp_path: Path, format: str, restarted: bool
) -> None:
    """The journal keeps the `/samples` body: a session sampled with rewards, a group, budgets and metadata (live,
    or on a server restarted from the journal) exports as that reply, field for field."""
    journal = tmp_path / "journal"
    with running_server(qwen3_tokenizer, journal=journal) as server:
        session_id = server.new_session()
        converse(server, session_id, [[{"role": "user", "content": f"question {index}"}] for index in range(3)])
        if not restarted:
            served = sample_as_asked(server, session_id, format)
    if restarted:
        with running_server(qwen3_tokenizer, journal=journal) as server:
            served = sample_as_asked(server, session_id, format)
    code, document = export(journal, tmp_path / "out", "--format", "jsonl" if format == "json" else format,
                            "--session", session_id)  # fmt: skip
    assert code == 0
    if format == "json":
        (sample,) = served
        assert sample["metadata"]["truncated_turns"] == 1 and sample["group_id"] == "g-7" and sample["reward"] == 1.0
        assert [orjson.loads(line) for line in document.splitlines()] == served
    else:
        assert orjson.loads(document) == served
