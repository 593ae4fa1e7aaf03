"""What one running server holds: launch options, the tokenizer pool, the engine, sessions and metrics.

Imports from tito: content_tokens, engines.protocol, matching, server.turns.engine_guard, server.metrics,
server.scaleout.router_release, server.sessions.registry, server.tokenizers, server.turns.turn_gate, tokenizer_protocol,
trajectory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tito.content_tokens import ContentSpecialTokens
from tito.engines.protocol import Engine
from tito.matching import matching_policy
from tito.server.metrics import ServerMetrics
from tito.server.scaleout.router_release import RouterRelease
from tito.server.sessions.registry import EventSink, SessionRegistry
from tito.server.tokenizers import TokenizerPool
from tito.server.turns.engine_guard import GuardedEngine
from tito.server.turns.turn_gate import TurnGate
from tito.tokenizer_protocol import Tokenizer
from tito.trajectory.events import TrajectoryKind
from tito.trajectory.picking import load_hook


@dataclass(frozen=True)
class ServerOptions:
    """`tito serve`'s options that shape request handling."""

    family: str = "default"
    chat_template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    allowed_append_roles: tuple[str, ...] | None = None
    """None: every role the family supports."""
    content_special_tokens: ContentSpecialTokens = None
    """Special-token text inside message content: `text` or `control`, one mode or per role (tito.content_tokens);
    None: text for tool output, control for the other roles."""
    api_key: str | None = None
    max_sessions: int | None = None
    session_ttl: float | None = None
    """Default idle TTL in seconds; None: sessions live until deleted."""
    max_body_bytes: int = 64 * 1024 * 1024
    engine_timeout: float = 600.0
    default_max_tokens: int = 4096
    """max_new_tokens when a request names none and the engine declares no context length."""
    model_name: str | None = None
    """What `/v1/models` and replies call the model; default: the engine's model name."""
    offload_chars: int = 32_768
    """Appended text longer than this is rendered and tokenized off the event loop (about 2 ms of rendering and
    tokenizing with the tiktoken encoder; the encoders release the GIL, so the loop serves other requests
    meanwhile). Shorter text is cheaper inline than the hop to a worker thread and back (benchmarks/turn_cpu.py)."""
    trajectory: TrajectoryKind = TrajectoryKind.LINEAR
    """The kind of a session whose `POST /sessions` names none."""
    strict_append_only: bool = False
    """Tree sessions' default: refuse any branch (400) instead of growing one."""
    matcher: str = "harness"
    """The matching policy of a session whose `POST /sessions` names none (`tito.matching.MATCHING_POLICIES`)."""
    hosted_tools: str = "drop"
    """What hosted tools in a Responses request get in a session whose `POST /sessions` names none: `drop` (left
    out of the prompt, recorded on the turn) or `refuse` (a 400)."""
    max_nodes: int | None = None
    """Tree sessions' default node limit; None: no limit."""
    sample_picker: str | None = None
    """Tree sessions: `module:function` choosing the leaves that become samples; None: drop superseded retries."""
    sample_postprocessor: str | None = None
    """Tree sessions: `module:function` run on the assembled samples; None: none."""
    journal: Path | None = None
    """Directory of the session journal: replayed on start, every event appended before its reply; None: memory."""
    journal_fsync: str = "always"
    """The journal's fsync policy: `always`, `interval` or `never` (see `tito.journal.FsyncPolicy`)."""
    journal_shared: bool = False
    """`journal` is shared by several tito processes behind one router: each writes its own stream under it, holds
    a lease, and takes over the sessions of a dead one (`tito.server.scaleout.ownership`)."""
    lease_ttl: float = 2.0
    """Shared journal: seconds after its last renewal at which a silent process's sessions may be taken over."""
    process_name: str = "tito"
    """This process's name: the `process` label of its metrics, its `X-Tito-Process` header, its lease."""


class ServerState:
    """The collaborators a request handler needs."""

    def __init__(
        self, tokenizer: Tokenizer, engine: Engine, options: ServerOptions, sink: EventSink | None = None
    ) -> None:
        matching_policy(options.matcher)  # an unknown policy fails at startup
        for hook, option in [(options.sample_picker, "--sample-picker"),
                             (options.sample_postprocessor, "--sample-postprocessor")]:  # fmt: skip
            if hook is not None:
                load_hook(hook, option)  # a bad hook fails at startup, not at the first /samples
        self.options = options
        self.metrics = ServerMetrics(options.process_name)
        self.engine = GuardedEngine(engine, len(tokenizer), self.metrics)
        """The engine behind its guard (replies checked, aborts that never fail a turn); `.inner` is the engine."""
        self.tokenizers = TokenizerPool(
            tokenizer,
            options.family,
            options.chat_template_kwargs,
            options.allowed_append_roles,
            options.content_special_tokens,
        )
        self.registry = SessionRegistry(max_sessions=options.max_sessions, sink=sink)
        self.registry.on_session_end = RouterRelease(engine, self.metrics)  # an ended session freed at the router
        self.gate = TurnGate(self.metrics)
        """Pauses and counts turns for weight updates (server.turns.drain)."""
        self.model_name = options.model_name or engine.info.model

    def reply_model(self, requested: str | None) -> str:
        """The `model` a reply names: the one the request asked for (clients such as Claude Code compare it with
        what they asked and drop their thinking blocks on resend when it differs), else the served model's."""
        return requested or self.model_name
