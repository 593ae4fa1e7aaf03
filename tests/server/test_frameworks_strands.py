"""strands-agents (OpenAI and Anthropic models) against tito, in its own venv (scripts/frameworks_strands_venv.sh:
strands pins openai and anthropic below tito's): each episode, thinking on and off, linear and tree, is one sample
holding every sampled id, trained. Marker `frameworks_strands` (not in the default run; .ci/run builds the venv and
runs it)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import Server, running_server
from tests.server.frameworks import Framework
from tests.server.test_frameworks import Episode, scripted_replies
from tito.tokenizer_loading import LocalTokenizer

pytestmark = pytest.mark.frameworks_strands

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv-frameworks-strands" / "bin" / "python"
DRIVER = Path(__file__).with_name("strands_episode.py")
STRANDS = Framework("strands-agents", "strands-agents", lambda url, stream: None, streams=True)
"""What the scripted model samples is the drift table's episode (the driver runs in the other venv)."""


@pytest.fixture(scope="module")
def server(qwen3_tokenizer: LocalTokenizer) -> Iterator[Server]:
    if not PYTHON.exists():
        pytest.fail(f"{PYTHON} is missing: bash scripts/frameworks_strands_venv.sh")
    with running_server(qwen3_tokenizer) as server:
        yield server


@pytest.mark.parametrize("trajectory", ["linear", "tree"])
@pytest.mark.parametrize("thinking", [True, False], ids=["think", "nothink"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_strands_episode_is_one_sample_holding_every_sampled_id(
    server: Server, qwen3_tokenizer: LocalTokenizer, provider: str, thinking: bool, trajectory: str
) -> None:
    scripted = [
        list(qwen3_tokenizer.encode(text, add_special_tokens=False)) for text in scripted_replies(STRANDS, thinking)
    ]
    session_id = server.new_session(trajectory=trajectory, chat_template_kwargs={"enable_thinking": thinking})
    server.engine.replies.clear()
    server.engine.queue(*scripted)
    try:
        ran = subprocess.run(
            [str(PYTHON), str(DRIVER), provider, f"{server.url}/sessions/{session_id}"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        server.engine.replies.clear()
    assert ran.returncode == 0, f"strands ({provider}) failed against tito:\n{ran.stderr[-3000:]}"
    described = server.http.get(f"/sessions/{session_id}").json()
    kept = server.http.post(f"/sessions/{session_id}/samples").json()["samples"]
    episode = Episode(scripted, kept)
    assert episode.kept_whole, f"{len(kept)} samples, resends {described['resends']}"
    resends = described["resends"]
    assert resends["failed"] == resends["branched"] == 0
    assert resends["matched_exactly"] + resends["matched_by_policy"] == len(scripted) - 1
    assert [c["kind"] for c in described["conversations"]] == ["main"]
