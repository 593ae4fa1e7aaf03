"""Dialects other than chat completions, as thin edges on the same sessions: Anthropic Messages and OpenAI
Responses. Each translates its request into the internal chat request and the committed turn back into its reply
and stream events; planning, the role gate, retries, the journal and samples never know which dialect a turn came
by (it is recorded as `metadata["dialect"]`).

Modules, in import order: signing (opaque round-trip values), edge (what both edges share), anthropic and
responses (request and reply translation), anthropic_stream and responses_stream (stream encoders), routes.

Imports from tito: errors, families.base, engines.protocol, parsing.incremental, server.turns.completions,
server.errors, server.models, server.replies, server.sessions.registry, server.state, server.turns.streaming,
trajectory.events.
"""
