"""`tito demo`: the embedded local model behind `tito serve`, one real session through the openai SDK, and
the sample a trainer would get (conversation, tokens coloured by loss mask with logprobs, totals).

It cannot fail on a model's whim: each step samples with its own fixed seed (the same replies on every run) under a
limit its replies fit, and a reply cut by the limit anyway ends the conversation with a line saying why (a turn cut
by length cannot be continued: the next request would be a 409) before the sample is shown.

Imports from tito: server.app, server.commands, server.state.
"""

from __future__ import annotations

from typing import Any

import httpx
from openai import OpenAI
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tito.server.app import create_app
from tito.server.commands.launch import build_state
from tito.server.commands.running import serve_in_thread
from tito.server.state import ServerOptions

_STEPS: list[tuple[str, list[dict[str, Any]]]] = [
    ("user question", [{"role": "user", "content": "What is the capital of France? Answer in one sentence."}]),
    ("follow-up", [{"role": "user", "content": "And roughly how many people live there?"}]),
    ("mid-session system message", [{"role": "system", "content": "From now on, answer in at most ten words."},
                                    {"role": "user", "content": "Name one famous museum there."}]),
    ("injected assistant (prompt, loss mask 0)", [
        {"role": "assistant", "content": "Summary so far: Paris, about two million people, the Louvre."},
        {"role": "user", "content": "Thanks. One more: which river runs through it?"}]),
]  # fmt: skip


DEMO_SEED = 7
"""Step i samples with seed DEMO_SEED + i: the demo's replies are the same on every run."""


def run_demo(port: int = 0, max_tokens: int = 160, engine: str = "local", family: str = "default") -> int:
    """Serve `engine` (the embedded SmolLM2 by default), drive the session, show the sample; returns 0."""
    console = Console()
    console.print(f"[bold]tito demo[/bold]: starting tito serve --engine {engine} ...")
    state = build_state(ServerOptions(family=family), engine=engine)
    roles = set(state.tokenizers.default.allowed_append_roles)
    with serve_in_thread(create_app(state), port=port) as base_url:
        session_id = httpx.post(f"{base_url}/sessions").json()["session_id"]
        client = OpenAI(base_url=f"{base_url}/sessions/{session_id}/v1", api_key="unused")
        messages: list[dict[str, Any]] = []
        for step, (title, appended) in enumerate(_STEPS):
            if messages and not {m["role"] for m in appended} <= roles:
                console.print(f"[yellow]skipped {title}: this family does not support appending those roles[/]")
                continue
            messages.extend(appended)
            reply = client.chat.completions.create(
                model=state.model_name,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=max_tokens,
                temperature=0.7,
                seed=DEMO_SEED + step,
            )
            messages.append(reply.choices[0].message.model_dump(exclude_none=True))
            console.print(f"[dim]{title}: {reply.usage.prompt_tokens if reply.usage else '?'} prompt ids, "
                          f"{reply.usage.completion_tokens if reply.usage else '?'} sampled[/]")  # fmt: skip
            if reply.choices[0].finish_reason == "length":
                console.print(f"[yellow]{title}: the reply reached max_tokens={max_tokens}; a turn cut by the "
                              "limit cannot be continued (the next request would be a 409), so the conversation "
                              "ends here[/]")  # fmt: skip
                break
        sample = httpx.post(f"{base_url}/sessions/{session_id}/samples", json={"reward": 1.0}).json()["samples"][0]
    _show(console, messages, sample, state.tokenizers.tokenizer)
    console.print(Panel(
        "tito serve --engine local --port 8000\n"
        "base URL for your agent: http://127.0.0.1:8000/sessions/<session_id>/v1 (POST /sessions first)",
        title="point your own agent at tito",
    ))  # fmt: skip
    return 0


def _show(console: Console, messages: list[dict[str, Any]], sample: dict[str, Any], tokenizer: Any) -> None:
    table = Table(title="conversation", show_lines=True)
    table.add_column("role")
    table.add_column("content")
    for message in messages:
        table.add_row(message["role"], str(message.get("content") or ""))
    console.print(table)
    text = Text()
    for token, mask, logprob in zip(sample["tokens"], sample["loss_mask"], sample["rollout_logprobs"], strict=True):
        piece = tokenizer.decode([token])
        text.append(piece, style="bold green" if mask else "dim")
        if mask:
            text.append(f"[{logprob:.2f}]", style="green dim")
    console.print(Panel(text, title="tokens: green = sampled (loss mask 1) with logprob, grey = prompt (mask 0)"))
    sampled = sum(sample["loss_mask"])
    console.print(f"tokens {len(sample['tokens'])}, sampled {sampled}, prompt {len(sample['tokens']) - sampled}, "
                  f"response_length {sample['response_length']}, status {sample['status']}, "
                  f"reward {sample['reward']}")  # fmt: skip
