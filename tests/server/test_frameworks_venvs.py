"""autogen-agentchat (reflection on and off) and inspect-ai against tito, each from a venv of its own
(scripts/frameworks_autogen_venv.sh, scripts/frameworks_inspect_venv.sh: each changes packages tito's own venv
holds): every episode, thinking on and off, linear and tree, is one sample per conversation holding every sampled
id, trained. Markers `frameworks_autogen` and `frameworks_inspect` (not in the default run; .ci/run builds the venvs
and runs them)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import Server, running_server
from tests.server.frameworks import Framework
from tests.server.test_frameworks import Episode, scripted_replies
from tito.tokenizer_loading import LocalTokenizer

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
AUTOGEN = ROOT / ".venv-frameworks-autogen" / "bin" / "python"
INSPECT = ROOT / ".venv-frameworks-inspect" / "bin" / "python"
BUILT_BY = {AUTOGEN: "scripts/frameworks_autogen_venv.sh", INSPECT: "scripts/frameworks_inspect_venv.sh"}
SCRIPTED = Framework("a venv's framework", "-", lambda url, stream: None, streams=True)
"""What the scripted model samples is the drift table's episode (two `get_weather` calls, then the answer)."""


@pytest.fixture(scope="module")
def server(qwen3_tokenizer: LocalTokenizer) -> Iterator[Server]:
    with running_server(qwen3_tokenizer) as server:
        yield server


def run_episode(
    server: Server, tokenizer: LocalTokenizer, python: Path, argv: Sequence[str], thinking: bool, trajectory: str
) -> tuple[Episode, dict[str, Any]]:
    """Runs `python argv... CHAT_URL` against a fresh session that plays the scripted episode; the episode as kept,
    and the session as described."""
    if not python.exists():
        pytest.fail(f"{python} is missing: bash {BUILT_BY[python]}")
    scripted = [list(tokenizer.encode(text, add_special_tokens=False)) for text in scripted_replies(SCRIPTED, thinking)]
    session_id = server.new_session(trajectory=trajectory, chat_template_kwargs={"enable_thinking": thinking})
    server.engine.replies.clear()
    server.engine.queue(*scripted)
    try:
        ran = subprocess.run(
            [str(python), *argv, server.chat_url(session_id)],
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
    finally:
        server.engine.replies.clear()
    assert ran.returncode == 0, f"{' '.join(argv)} failed against tito:\n{ran.stderr[-3000:]}"
    described = dict(server.http.get(f"/sessions/{session_id}").json())
    kept = server.http.post(f"/sessions/{session_id}/samples").json()["samples"]
    return Episode(scripted, kept, described["resends"], described["conversations"]), described


def assert_one_sample_with_every_sampled_id(episode: Episode, rules: frozenset[str] = frozenset()) -> None:
    assert episode.kept_whole, f"{len(episode.samples)} samples, resends {episode.resends}"
    resends = episode.resends
    assert resends["failed"] == resends["branched"] == 0
    assert resends["matched_exactly"] + resends["matched_by_policy"] == len(episode.scripted) - 1
    assert rules <= set(resends["rules"]), resends
    assert [c["kind"] for c in episode.conversations] == ["main"]


@pytest.mark.frameworks_autogen
@pytest.mark.parametrize("trajectory", ["linear", "tree"])
@pytest.mark.parametrize("thinking", [True, False], ids=["think-stream", "nothink-whole"])
@pytest.mark.parametrize("variant", ["reflect", "plain"])
def test_an_autogen_episode_is_one_sample_holding_every_sampled_id(
    server: Server, qwen3_tokenizer: LocalTokenizer, variant: str, thinking: bool, trajectory: str
) -> None:
    """`reflect`: autogen's reflection call resends the conversation without `tools` (once a 400
    ToolsChangedError): the stored tools stay (`tools_omitted`). Streamed with thinking on, whole without."""
    stream = "stream" if thinking else "whole"
    argv = [str(HERE / "autogen_episode.py"), variant, stream]
    episode, _ = run_episode(server, qwen3_tokenizer, AUTOGEN, argv, thinking, trajectory)
    assert_one_sample_with_every_sampled_id(episode, frozenset({"tools_omitted"} if variant == "reflect" else ()))


@pytest.mark.frameworks_inspect
@pytest.mark.parametrize("trajectory", ["linear", "tree"])
@pytest.mark.parametrize("thinking", [True, False], ids=["think", "nothink"])
def test_an_inspect_ai_episode_is_one_sample_holding_every_sampled_id(
    server: Server, qwen3_tokenizer: LocalTokenizer, thinking: bool, trajectory: str, tmp_path: Path
) -> None:
    """With thinking on, inspect resends the empty content of its tool-call replies as whitespace
    (`whitespace_content`, once a 400 on `content`)."""
    argv = [str(HERE / "inspect_episode.py"), str(tmp_path / "logs")]
    episode, _ = run_episode(server, qwen3_tokenizer, INSPECT, argv, thinking, trajectory)
    assert_one_sample_with_every_sampled_id(episode, frozenset({"whitespace_content"} if thinking else ()))
