"""tito's error hierarchy: every failure names what, where and the fix, and carries its HTTP status.

TitoError
 ├── ConfigurationError (400)      bad family, role set or kwargs at construction
 │    ├── UnknownTemplateKwargError (400)  a kwarg the template never reads
 │    └── PinnedKwargError (400)           a kwarg that contradicts a pinned one
 ├── MessageError (400)            a malformed message: which index, which field
 ├── ToolDefinitionError (400)     a malformed tool definition: which index, which field
 ├── AppendOnlyError (400)         new messages do not extend the stored ones
 ├── RoleNotAllowedError (400)     an appended role outside the session's allowed roles
 ├── TemplateRenderError (400)     the chat template refused the conversation
 ├── TokenIdError (400)            a token id that is not an int inside the vocabulary
 ├── TruncatedTurnError (409)      a request extends a turn cut by the length limit
 ├── JunctionError (409)           stored ids cannot be extended (e.g. a turn cut by length)
 ├── TokenMismatchError (500)      incremental ids differ from the in-context ids
 ├── JournalError (500)           the session journal cannot be written or read back (which file, which offset)
 └── EngineError (502)             the inference engine failed; carries the engine's own words and a fault kind
      ├── EngineUnavailableError (503)  unreachable, unhealthy or overloaded (with Retry-After)
      ├── EngineTimeoutError (504)      no answer in time
      ├── EngineResponseError (502)     an error status, an unreadable or invalid reply, a stream cut short
      └── EngineRequestError (400)      the engine refused the request's content (400/413/422: prompt too long,
                                        a sampling parameter out of range): the client's to fix

Only the server turns these into HTTP bodies; this module imports nothing from tito.
"""

from __future__ import annotations

from collections.abc import Mapping


class TitoError(Exception):
    """Base of every error tito raises on purpose."""

    http_status: int = 500
    retry_after: int | None = None
    """Seconds a client should wait before retrying (the reply's Retry-After header); None: no header."""


class ConfigurationError(TitoError, ValueError):
    """A family, role set or kwarg combination that cannot work, found at construction."""

    http_status = 400


class UnknownTemplateKwargError(ConfigurationError):
    """A chat-template kwarg the family's template (or encoder) never reads: a typo would silently do nothing."""

    def __init__(self, family: str, kwarg: str, accepted: tuple[str, ...]) -> None:
        self.family = family
        self.kwarg = kwarg
        self.accepted = accepted
        super().__init__(f"unknown chat-template kwarg {kwarg!r}; {family} reads: {', '.join(accepted) or 'no kwargs'}")


class PinnedKwargError(ConfigurationError):
    """A chat-template kwarg that contradicts one the family pins to keep rendering append-only."""

    def __init__(self, family: str, kwarg: str, pinned: object, given: object) -> None:
        self.family = family
        self.kwarg = kwarg
        self.pinned = pinned
        self.given = given
        super().__init__(
            f"family {family!r} pins {kwarg}={pinned!r} (got {given!r}): the pinned value keeps rendering "
            "append-only; drop the kwarg or use the default family for a custom template"
        )


class MessageError(TitoError, ValueError):
    """A message that is not a valid OpenAI chat message."""

    http_status = 400

    def __init__(self, index: int, field: str, problem: str) -> None:
        self.index = index
        self.field = field
        self.problem = problem
        super().__init__(f"message {index}: field {field!r}: {problem}")


class ToolDefinitionError(TitoError, ValueError):
    """A `tools` entry that is not a tool definition tito can render."""

    http_status = 400

    def __init__(self, index: int, field: str, problem: str) -> None:
        self.index = index
        self.field = field
        self.problem = problem
        super().__init__(f"tools[{index}]: field {field!r}: {problem}")


class AppendOnlyError(TitoError, ValueError):
    """The new messages rewrite a stored message instead of appending after it."""

    http_status = 400

    def __init__(self, index: int, field: str, expected: object, actual: object, hint: str = "") -> None:
        self.index = index
        self.field = field
        self.expected = expected
        self.actual = actual
        if field in _ID_KEYS or field.endswith(".id"):
            shown = "the stored and the sent id differ (ids are not quoted: clients read digits in them as a status)"
        else:
            shown = _difference(expected, actual)
        message = f"message {index} differs from the stored conversation in {field!r}: {shown}"
        super().__init__(message + (f". {hint}" if hint else ""))


class RoleNotAllowedError(TitoError, ValueError):
    """An appended message whose role the session does not allow."""

    http_status = 400

    def __init__(self, index: int, role: str, allowed: tuple[str, ...]) -> None:
        self.index = index
        self.role = role
        self.allowed = allowed
        super().__init__(
            f"message {index}: role {role!r} is not supported: this session does not allow it to be appended "
            f"(allowed append roles: {', '.join(allowed)})"
        )


class TemplateRenderError(TitoError, ValueError):
    """The chat template raised (raise_exception) or failed on the conversation."""

    http_status = 400


class TokenIdError(TitoError, ValueError):
    """An id in `completion_ids`, `stored_ids` (or another id argument) that is not an int inside the vocabulary."""

    http_status = 400

    def __init__(self, argument: str, position: int, value: object, vocabulary_size: int) -> None:
        self.argument = argument
        self.position = position
        self.value = value
        self.vocabulary_size = vocabulary_size
        super().__init__(
            f"{argument}[{position}] = {_clip(value)} is not a token id: ids are ints from 0 to {vocabulary_size - 1}"
        )


class JunctionError(TitoError):
    """Stored ids do not end the way the family's junction rule needs."""

    http_status = 409

    def __init__(self, family: str, problem: str, last_id: int | None = None) -> None:
        self.family = family
        self.problem = problem
        self.last_id = last_id
        super().__init__(f"family {family}: {problem}")


class TruncatedTurnError(TitoError):
    """A request extends a generation that was cut by the length limit: its ids end mid-turn (409)."""

    http_status = 409

    def __init__(self, node_id: int, response_id: str) -> None:
        self.node_id = node_id
        self.response_id = response_id
        super().__init__(
            f"the request extends turn {node_id} (response {response_id}), which was cut by the length limit: its "
            "ids end without a stop token, so it cannot be continued; retry that turn (resend the conversation "
            "without its reply) or start from an earlier point"
        )


class TokenMismatchError(TitoError):
    """Incremental ids differ from what the tokenizer gives in context: never silently accepted."""

    http_status = 500

    def __init__(self, family: str, position: int, expected: object, actual: object, detail: str = "") -> None:
        self.family = family
        self.position = position
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"family {family}: appended ids differ from the in-context render at token {position}: expected "
            f"{_clip(expected)}, got {_clip(actual)}" + (f"; {detail}" if detail else "")
        )


_AROUND = 60
"""Characters shown on each side of the first difference of two long strings."""
_ID_KEYS = ("id", "tool_call_id", "call_id")


def _difference(expected: object, actual: object, limit: int = 200) -> str:
    """Both values, clipped; two strings too long to show whole: the first differing offset and the text around it
    in each. Ids are never quoted (a client reads "429" inside a hex call id as a rate limit): a field that is an
    id says only that it differs, and ids inside a shown message are replaced by `<id>`."""
    if isinstance(expected, str) and isinstance(actual, str) and max(len(expected), len(actual)) > limit:
        offset = next(
            (i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b),
            min(len(expected), len(actual)),
        )
        start = max(0, offset - _AROUND)

        def around(text: str) -> str:
            shown = repr(text[start : offset + _AROUND])
            return ("..." if start else "") + shown + ("..." if offset + _AROUND < len(text) else "")

        return (
            f"first difference at character {offset} (stored {len(expected)} characters, got {len(actual)}): "
            f"stored {around(expected)}, got {around(actual)}"
        )
    return f"stored {_clip(_without_ids(expected))}, got {_clip(_without_ids(actual))}"


def _without_ids(value: object) -> object:
    """`value` with every id-like string (a tool call's `id`, a `tool_call_id`) shown as `<id>`."""
    if isinstance(value, Mapping):
        return {
            key: "<id>" if key in _ID_KEYS and isinstance(item, str) else _without_ids(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_without_ids(item) for item in value]
    return value


def _clip(value: object, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class EngineError(TitoError):
    """An inference engine failed; carries the engine's name, its own words and the kind of fault (the `code` of
    the error body and the `kind` label of the `tito_engine_faults` metric). Base of the engine errors."""

    http_status = 502
    fault = "bad_reply"
    """The default kind of fault of the class; a raise may name a narrower one (`fault=`)."""

    def __init__(self, engine: str, detail: str, *, status: int | None = None, fault: str | None = None) -> None:
        self.engine = engine
        self.detail = detail
        self.engine_status = status
        if fault is not None:
            self.fault = fault
        where = f" (HTTP {status})" if status is not None else ""
        super().__init__(f"engine {engine!r}{where}: {detail}")


class EngineUnavailableError(EngineError):
    """The engine could not be reached (connection refused), is not healthy or is overloaded (its 503 or 429):
    503 with Retry-After, so a client waits and retries."""

    http_status = 503
    fault = "unavailable"
    retry_after = 1


class EngineTimeoutError(EngineError):
    """The engine did not answer within the configured time."""

    http_status = 504
    fault = "timeout"


class EngineResponseError(EngineError):
    """The engine answered with an error status or a reply tito cannot use (not JSON, fields missing, ids outside
    the vocabulary, logprobs not finite, an unknown finish reason, a stream cut short)."""

    http_status = 502


class EngineRequestError(EngineError):
    """The engine refused the request's content (400/413/422: prompt too long, bad sampling parameter)."""

    http_status = 400
    fault = "refused"


class JournalError(TitoError):
    """The session journal failed: a write or fsync error, or a record that passed its checksum but cannot be
    decoded (a format version this tito does not read). Names the file and offset where known."""

    http_status = 500
