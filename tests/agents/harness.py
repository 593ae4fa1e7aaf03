"""The real-agent suite's harness: `tito serve` as a subprocess on 127.0.0.1 in front of the scripted SGLang engine
(tests.agents.scripted_engine), an agent CLI run with no network and a HOME of its own, and the checks every run
makes (no 4xx/5xx in tito's access log, every sampled id of every generation trained in exactly one sample).

Agents are pinned and installed into `.agents/` by scripts/install_agents.sh; a missing one fails the test with the
command to run (never a skip).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.agents.scripted_engine import Generation, ScriptedSglang
from tito.families import get_family

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / ".agents"
INSTALL = "bash scripts/install_agents.sh"

NO_NETWORK_ENV = {
    # Claude Code / the Claude Agent SDK: no telemetry, updates, error reports or other side traffic.
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "IS_SANDBOX": "1",
    # Codex, Qwen Code, opencode (33c's agents) set their own in their tests.
}


def installed(path: Path) -> Path:
    """An agent's executable under .agents/, or a failure that says how to install it."""
    if not path.exists():
        raise AssertionError(f"{path.relative_to(ROOT)} is not installed: run `{INSTALL}` first")
    return path


@dataclass
class Tito:
    """A running `tito serve` (its stderr, the access log, in `log`)."""

    url: str
    log: Path
    process: subprocess.Popen[bytes]
    http: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.Client(base_url=self.url, timeout=30)

    def new_session(self, **config: Any) -> str:
        response = self.http.post("/sessions", json=config or None)
        assert response.status_code == 200, response.text
        return str(response.json()["session_id"])

    def base_url(self, session_id: str) -> str:
        """The session's base URL (Anthropic clients add `/v1/messages`; OpenAI ones take `.../v1`)."""
        return f"{self.url}/sessions/{session_id}"

    def access_log(self) -> list[dict[str, Any]]:
        """Every request tito served, as its access-log lines."""
        lines = []
        for line in self.log.read_text(errors="replace").splitlines():
            start = line.find("{")
            if start < 0:
                continue
            try:
                entry = json.loads(line[start:])
            except ValueError:
                continue
            if isinstance(entry, dict) and "status" in entry and "route" in entry:
                lines.append(entry)
        return lines

    def errors(self) -> list[dict[str, Any]]:
        """The requests tito answered 4xx or 5xx."""
        return [entry for entry in self.access_log() if int(entry["status"]) >= 400]

    def counted_errors(self) -> dict[str, float]:
        """`tito_errors_total` by type from /metrics: also the errors a stream reports after its HTTP 200 (an
        `event: error`, a `response.failed`), which the access log shows as 200."""
        counted: dict[str, float] = {}
        for line in self.http.get("/metrics").text.splitlines():
            if line.startswith("tito_errors_total{"):
                labels, value = line.rsplit(" ", 1)
                kind = labels.split('type="', 1)[1].split('"', 1)[0]
                counted[kind] = counted.get(kind, 0.0) + float(value)
        return {kind: value for kind, value in counted.items() if value}

    def session(self, session_id: str) -> dict[str, Any]:
        return dict(self.http.get(f"/sessions/{session_id}").json())

    def samples(self, session_id: str, **body: Any) -> list[dict[str, Any]]:
        response = self.http.post(f"/sessions/{session_id}/samples", json=body or None)
        assert response.status_code == 200, response.text
        return list(response.json()["samples"])


ANNOUNCED = re.compile(r"agents use base_url http://127\.0\.0\.1:(\d+)/")


@contextmanager
def tito_serve(engine: ScriptedSglang, family: str, log: Path, *args: str) -> Iterator[Tito]:
    """`python -m tito serve --engine sglang` on a port the OS picks (`--port 0`, read back from the line tito prints
    once bound: no other process can hold it), stopped (SIGTERM) when the block ends."""
    command = [sys.executable, "-m", "tito", "serve", "--family", family, "--engine", "sglang", "--engine-url",
               engine.url, "--host", "127.0.0.1", "--port", "0", "--log-level", "info", *args]  # fmt: skip
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env={**os.environ})
    tito: Tito | None = None
    try:
        deadline = time.monotonic() + 60
        while tito is None:
            announced = ANNOUNCED.search(log.read_text(errors="replace"))
            if announced:
                tito = Tito(f"http://127.0.0.1:{announced.group(1)}", log, process)
            elif process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"tito serve did not start:\n{log.read_text()}")
            else:
                time.sleep(0.1)
        while True:
            try:
                if tito.http.get("/ready").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"tito serve did not become ready:\n{log.read_text()}")
            time.sleep(0.1)
        yield tito
    finally:
        if tito is not None:
            tito.http.close()
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


@dataclass
class AgentRun:
    """What one agent command did."""

    command: Sequence[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def output_json(self) -> Any:
        """The last JSON document the agent printed on stdout (`--output-format json` and the like)."""
        for line in reversed(self.stdout.strip().splitlines()):
            try:
                return json.loads(line)
            except ValueError:
                continue
        raise AssertionError(f"no JSON on stdout:\n{self.stdout[-2000:]}\n{self.stderr[-2000:]}")

    def check(self) -> AgentRun:
        assert self.returncode == 0, (
            f"{' '.join(self.command)} exited {self.returncode}\nstdout:\n{self.stdout[-3000:]}\n"
            f"stderr:\n{self.stderr[-3000:]}"
        )
        return self


def agent_env(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """A clean environment for an agent: PATH and locale from here, HOME its own, no proxies, the no-network
    switches, then `extra` (the base URL, a key, a model); an empty value in `extra` unsets a switch."""
    keep = {key: os.environ[key] for key in ("PATH", "LANG", "LC_ALL", "TERM", "TMPDIR") if key in os.environ}
    home.mkdir(parents=True, exist_ok=True)
    env = {**keep, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), **NO_NETWORK_ENV, **extra}
    return {key: value for key, value in env.items() if value != ""}


def run_agent(command: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float = 180) -> AgentRun:
    started = time.monotonic()
    done = subprocess.run(
        list(command), cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    return AgentRun(command, done.returncode, done.stdout, done.stderr, time.monotonic() - started)


class Tmux:
    """An interactive agent in a detached tmux session on a tmux server of its own (its socket under `folder`), so
    ending it ends nothing else."""

    def __init__(self, folder: Path, command: Sequence[str], cwd: Path, env: Mapping[str, str]) -> None:
        self.socket = str(folder / "tmux.sock")
        line = " ".join(shlex.quote(part) for part in ["env", "-i", *(f"{k}={v}" for k, v in env.items()), *command])
        self._tmux("new-session", "-d", "-s", "agent", "-x", "160", "-y", "50", "-c", str(cwd), line + "; sleep 600")

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, f"tmux {args[0]}: {done.stderr}"
        return done.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "agent")

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while text not in (screen := self.screen()):
            assert time.monotonic() < deadline, f"{text!r} did not appear; the screen:\n{screen}"
            time.sleep(0.3)
        return screen

    def type(self, text: str) -> None:
        """Types `text`, waits until the screen shows it (an input box that is not ready yet drops keys: typed
        again), then presses Enter."""
        for _ in range(5):
            self._tmux("send-keys", "-t", "agent", "-l", text)
            deadline = time.monotonic() + 5
            while text[-20:] not in self.screen().replace("\n", "") and time.monotonic() < deadline:
                time.sleep(0.2)
            if text[-20:] in self.screen().replace("\n", ""):
                break
            self._tmux("send-keys", "-t", "agent", "C-u")
        time.sleep(0.3)
        self._tmux("send-keys", "-t", "agent", "Enter")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=30)


def trained_once(
    generations: Sequence[Generation], samples: Sequence[Mapping[str, Any]], dropped_at_junction: int = 0
) -> list[str]:
    """What breaks "every sampled id of every generation is in exactly one sample, with loss mask 1": each
    generation's ids are one run of mask-1 ids in exactly one place over all samples, and the samples train no
    other ids. A family whose stop id is the next message's opener (GLM) re-renders that id as the next prompt's,
    so a generation that a later turn continues is trained without its last `dropped_at_junction` ids."""
    problems = []
    runs: list[tuple[int, int, int]] = []  # (sample, start, end) of every masked run
    for index, sample in enumerate(samples):
        mask, start = sample["loss_mask"], None
        for position, bit in enumerate([*mask, 0]):
            if bit and start is None:
                start = position
            elif not bit and start is not None:
                runs.append((index, start, position))
                start = None
    found = 0
    for number, generation in enumerate(generations):
        ids = generation.output_ids
        places: list[tuple[int, int]] = []
        for trained in (ids, ids[: len(ids) - dropped_at_junction]) if dropped_at_junction else (ids,):
            size = len(trained)
            places = [
                (sample, start)
                for sample, start, end in runs
                if end - start == size and list(samples[sample]["tokens"][start:end]) == trained
            ]
            if places:
                found += size * len(places)
                break
        if len(places) != 1:
            problems.append(f"generation {number} ({len(ids)} ids) is trained in {len(places)} places")
    trained_ids = sum(sum(sample["loss_mask"]) for sample in samples)
    if trained_ids != found:
        problems.append(f"the samples train {trained_ids} ids, {found} of them sampled")
    return problems


def check_episode(tito: Tito, engine: ScriptedSglang, session_id: str) -> list[dict[str, Any]]:
    """The checks every run makes; returns the session's samples."""
    dropped = get_family(engine.renderer.family).junction.trailing_ids_dropped
    assert not engine.errors, engine.errors
    assert tito.errors() == [], f"tito answered errors: {tito.errors()}\n{tito.log.read_text()[-4000:]}"
    assert tito.counted_errors() == {}, f"tito counted errors: {tito.counted_errors()}\n{tito.log.read_text()[-4000:]}"
    samples = tito.samples(session_id)
    problems = trained_once(engine.sampled(), samples, dropped)
    assert not problems, problems
    return samples
