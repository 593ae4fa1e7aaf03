"""TitoTokenizer's contract: role gate, pinned kwargs, verbatim stored ids, loud failures."""

from __future__ import annotations

import array
import dataclasses
import re
from typing import Any

import pytest

from tests.conftest import family_tito, family_tokenizer, reference_path
from tito import VALID_APPEND_ROLES, get_tito_tokenizer
from tito.conformance import TOOLS, shapes, simulated_stored_ids
from tito.errors import (
    AppendOnlyError,
    ConfigurationError,
    JunctionError,
    MessageError,
    PinnedKwargError,
    RoleNotAllowedError,
    TokenIdError,
    TokenMismatchError,
    ToolDefinitionError,
    UnknownTemplateKwargError,
)
from tito.families import fixed_families, get_family
from tito.families.base import RenderContext
from tito.path_ids import PathIds
from tito.tokenizer import TitoTokenizer
from tito.tokenizer_loading import LocalTokenizer, build_proxy_tokenizer, load_tokenizer

HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi there.", "reasoning_content": "Greet."},
]


def stored_ids(tokenizer: LocalTokenizer, text: str) -> list[int]:
    """An engine's view of the history: ids through the sampled <|im_end|>, without the template's newline."""
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids[-1:]) == "\n"
    return ids[:-1]


def test_allowed_roles_outside_the_append_roles_are_rejected_at_construction(qwen3_tokenizer: LocalTokenizer) -> None:
    with pytest.raises(ConfigurationError, match="developer"):
        get_tito_tokenizer(qwen3_tokenizer, "qwen3", allowed_append_roles=["user", "developer"])


def test_appending_a_disallowed_role_names_the_message_and_role(qwen3_tokenizer: LocalTokenizer) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3", allowed_append_roles=["tool"])
    new = [*HISTORY, {"role": "user", "content": "more"}]
    with pytest.raises(RoleNotAllowedError, match="message 3: role 'user' is not supported") as error:
        tt.tokenize_additional_messages(HISTORY, new)
    assert error.value.http_status == 400


@pytest.mark.parametrize("roles", [None, ("tool",), ("user", "system"), VALID_APPEND_ROLES])
def test_allowed_roles_never_change_rendered_bytes(qwen3_tokenizer: LocalTokenizer, roles: tuple | None) -> None:
    reference = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    gated = get_tito_tokenizer(qwen3_tokenizer, "qwen3", allowed_append_roles=roles)
    assert gated.render(HISTORY, add_generation_prompt=True) == reference.render(HISTORY, add_generation_prompt=True)


def test_a_kwarg_contradicting_a_pinned_one_is_an_error(qwen3_tokenizer: LocalTokenizer) -> None:
    with pytest.raises(PinnedKwargError, match=r"pins clear_thinking=False \(got True\)") as error:
        get_tito_tokenizer(qwen3_tokenizer, "qwen3", {"clear_thinking": True})
    assert (error.value.kwarg, error.value.pinned, error.value.given) == ("clear_thinking", False, True)
    repeated = get_tito_tokenizer(qwen3_tokenizer, "qwen3", {"clear_thinking": False, "enable_thinking": False})
    assert repeated.template_kwargs == {"clear_thinking": False, "enable_thinking": False}


def test_editing_a_stored_message_is_an_append_only_error(qwen3_tokenizer: LocalTokenizer) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    edited = [*HISTORY[:2], {**HISTORY[2], "content": "Hi!"}, {"role": "user", "content": "x"}]
    with pytest.raises(AppendOnlyError, match=r"message 2 .* 'content'"):
        tt.merge_tokens(HISTORY, edited, stored_ids(qwen3_tokenizer, tt.render(HISTORY)))


def test_stored_ids_are_kept_verbatim_even_when_not_canonical(qwen3_tokenizer: LocalTokenizer) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    canonical = stored_ids(qwen3_tokenizer, tt.render(HISTORY))
    # The model spelled "Hi there." as single characters: same text, other ids. tito must keep them.
    body_start = len(qwen3_tokenizer.encode(tt.render(HISTORY[:2], add_generation_prompt=True)))
    sampled_text = qwen3_tokenizer.decode(canonical[body_start:-1])
    spelled = [qwen3_tokenizer.encode(ch)[0] for ch in sampled_text]
    stored = [*canonical[:body_start], *spelled, canonical[-1]]
    assert stored != canonical
    new = [*HISTORY, {"role": "user", "content": "Next"}]
    merged = tt.merge_tokens(HISTORY, new, stored)
    assert merged[: len(stored)] == stored
    assert merged[len(stored) :] == tt.tokenize_additional_messages(HISTORY, new)


def test_a_turn_cut_by_length_cannot_be_extended(qwen3_tokenizer: LocalTokenizer) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    truncated = stored_ids(qwen3_tokenizer, tt.render(HISTORY))[:-1]
    with pytest.raises(JunctionError, match="not with a stop token") as error:
        tt.merge_tokens(HISTORY, [*HISTORY, {"role": "user", "content": "go on"}], truncated)
    assert error.value.http_status == 409


def test_first_turn_merge_is_the_whole_prompt(qwen3_tokenizer: LocalTokenizer) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    prompt = tt.merge_tokens([], HISTORY[:2], [])
    assert prompt == qwen3_tokenizer.encode(tt.render(HISTORY[:2], add_generation_prompt=True))


def test_a_tokenizer_that_does_not_split_at_the_end_of_turn_fails_loudly() -> None:
    """Negative control for Invariant 3: a tokenizer that swallows `<|im_end|>\\n` into one token is refused."""
    tokenizer = build_proxy_tokenizer(["<|im_end|>\n"], base="qwen3")
    tt = get_tito_tokenizer(tokenizer, "qwen3")
    with pytest.raises(TokenMismatchError, match=r"at token 0.*message 3") as error:
        tt.tokenize_additional_messages(HISTORY, [*HISTORY, {"role": "user", "content": "x"}])
    assert (error.value.family, error.value.position) == ("qwen3", 0)


def test_a_family_marker_that_is_not_atomic_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="must be one token"):
        get_tito_tokenizer(load_tokenizer("deepseekv4"), "qwen3")


def test_turn_cost_does_not_depend_on_the_history(
    qwen3_tokenizer: LocalTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tokenizer only ever sees the appended span: its input length is the same after 2 or 200 turns."""
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    seen: list[int] = []
    original = qwen3_tokenizer.encode
    monkeypatch.setattr(
        qwen3_tokenizer, "encode", lambda text, add_special_tokens=False: seen.append(len(text)) or original(text)
    )
    lengths = []
    for turns in (1, 100):
        history = [HISTORY[0]]
        for i in range(turns):
            history += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
        seen.clear()
        tt.tokenize_additional_messages(history, [*history, {"role": "user", "content": "last"}])
        lengths.append(sum(seen))
    assert lengths[0] == lengths[1]


def test_a_full_history_family_tokenizes_only_the_appended_span_but_renders_the_whole_history(
    qwen3_tokenizer: LocalTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `default` family (RenderContext.FULL_HISTORY: a checkpoint template tito does not control) pays what the
    README says: two renders of the whole stored conversation per turn (its render, then with the appended messages),
    while the tokenizer still only sees the appended span."""
    template = get_family("qwen3").fixed_template.source()  # append-only for every role, as a checkpoint's own
    checkpoint = LocalTokenizer(qwen3_tokenizer.backend, template, dict(qwen3_tokenizer.special_tokens_map))
    tt = get_tito_tokenizer(checkpoint, "default")
    assert tt.family.context is RenderContext.FULL_HISTORY
    rendered: list[int] = []
    render = tt._render
    monkeypatch.setattr(
        tt, "_render", lambda messages, *rest: rendered.append(len(messages)) or render(messages, *rest)
    )
    encoded: list[int] = []
    encode = checkpoint.encode
    monkeypatch.setattr(
        checkpoint, "encode", lambda text, add_special_tokens=False: encoded.append(len(text)) or encode(text)
    )
    costs = []
    for turns in (1, 100):
        history = [HISTORY[0]]
        for i in range(turns):
            history += [{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
        rendered.clear()
        encoded.clear()
        tt.tokenize_additional_messages(history, [*history, {"role": "user", "content": "last"}])
        costs.append((rendered.copy(), sum(encoded)))
    assert costs[0][0] == [3, 4] and costs[1][0] == [201, 202]  # messages rendered: the history, then with the new one
    assert costs[0][1] == costs[1][1]


@pytest.mark.parametrize("family", fixed_families())
def test_resolved_template_is_the_one_rendered(family: str) -> None:
    from tito import resolve_fixed_chat_template

    path, kwargs = resolve_fixed_chat_template(family)
    assert kwargs == dict(get_family(family).fixed_template.extra_kwargs)
    kwargs["mutated"] = True
    assert "mutated" not in resolve_fixed_chat_template(family)[1], "the resolver must return a copy"
    assert (path is None) == (get_family(family).encoder is not None)


def test_parse_completion_reads_back_what_the_family_renders(qwen3_tokenizer: LocalTokenizer) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    answer = {"role": "assistant", "content": "Hi there.", "reasoning_content": "Greet."}
    prompt_ids = tt.merge_tokens([], HISTORY[:2], [])
    turn_ids = stored_ids(qwen3_tokenizer, tt.render([*HISTORY[:2], answer]))
    assert turn_ids[: len(prompt_ids)] == prompt_ids
    result = tt.parse_completion(turn_ids[len(prompt_ids) :], prompt_ids)
    assert result.finish_reason == "stop"
    assert {k: result.message.get(k) for k in answer} == answer


def test_a_transformers_tokenizer_works_as_is(qwen3_tokenizer: LocalTokenizer) -> None:
    """DESIGN's entry point takes a Hugging Face tokenizer; it must give the same prompt as tito's own loader."""
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    from tests.conftest import reference_path

    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(reference_path("tokenizers", "qwen3")))
    ours, theirs = get_tito_tokenizer(qwen3_tokenizer, "qwen3"), get_tito_tokenizer(hf_tokenizer, "qwen3")
    new = [*HISTORY, {"role": "user", "content": "And now?"}]
    stored = stored_ids(qwen3_tokenizer, ours.render(HISTORY))
    assert theirs.merge_tokens(HISTORY, new, stored) == ours.merge_tokens(HISTORY, new, stored)
    assert theirs.render(new) == ours.render(new)
    completion = stored[len(qwen3_tokenizer.encode(ours.render(HISTORY[:2], add_generation_prompt=True))) :]
    assert theirs.parse_completion(completion).message == ours.parse_completion(completion).message


def first_cut(tt: TitoTokenizer) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A stored conversation ending with a generated assistant, and the request appending a user turn to it."""
    turns = shapes()["multi_user"]
    messages = [turn.message for turn in turns]
    return messages[:3], messages[:4]


def test_an_unknown_template_kwarg_is_named_with_the_ones_the_template_reads(qwen3_tokenizer: LocalTokenizer) -> None:
    with pytest.raises(
        UnknownTemplateKwargError, match="unknown chat-template kwarg 'enable_thinkng'; qwen3 reads: "
    ) as error:
        get_tito_tokenizer(qwen3_tokenizer, "qwen3", {"enable_thinkng": False})
    assert error.value.kwarg == "enable_thinkng" and "enable_thinking" in error.value.accepted
    assert error.value.http_status == 400


def test_an_encoder_family_checks_the_kwargs_its_encoder_declares() -> None:
    tokenizer = family_tokenizer("deepseekv4")
    assert get_tito_tokenizer(tokenizer, "deepseekv4", {"thinking": True, "reasoning_effort": "max"})
    with pytest.raises(UnknownTemplateKwargError, match=r"'enable_thinkng'; deepseekv4 reads: .*thinking_mode"):
        get_tito_tokenizer(tokenizer, "deepseekv4", {"enable_thinkng": True})
    with pytest.raises(UnknownTemplateKwargError, match="'reasoning_effort'"):
        get_tito_tokenizer(family_tokenizer("deepseekv32"), "deepseekv32", {"reasoning_effort": "max"})


def test_the_default_family_reads_the_kwargs_of_the_checkpoint_template(qwen3_tokenizer: LocalTokenizer) -> None:
    official = reference_path("templates", "qwen3.jinja").read_text(encoding="utf-8")
    checkpoint = LocalTokenizer(qwen3_tokenizer.backend, official, dict(qwen3_tokenizer.special_tokens_map))
    assert get_tito_tokenizer(checkpoint, "default", {"enable_thinking": False}).template_kwargs == {
        "enable_thinking": False
    }
    with pytest.raises(UnknownTemplateKwargError, match=r"'clear_thinking'; default reads: enable_thinking$"):
        get_tito_tokenizer(checkpoint, "default", {"clear_thinking": False})


@pytest.mark.parametrize("kwargs", [["enable_thinking"], "enable_thinking=false", 3])
def test_template_kwargs_that_are_not_an_object_are_a_configuration_error(
    qwen3_tokenizer: LocalTokenizer, kwargs: Any
) -> None:
    with pytest.raises(ConfigurationError, match="chat_template_kwargs must be a JSON object"):
        get_tito_tokenizer(qwen3_tokenizer, "qwen3", kwargs)
    with pytest.raises(ConfigurationError, match="chat_template_kwargs must be a JSON object"):
        get_tito_tokenizer(qwen3_tokenizer, "qwen3").request_template_kwargs(kwargs)


def test_request_kwargs_merge_over_the_launch_kwargs_and_are_checked(qwen3_tokenizer: LocalTokenizer) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3", {"enable_thinking": False})
    assert tt.request_template_kwargs(None) == {"enable_thinking": False, "clear_thinking": False}
    assert tt.request_template_kwargs({"enable_thinking": True}) == {"enable_thinking": True, "clear_thinking": False}
    with pytest.raises(UnknownTemplateKwargError, match="'thinking'"):
        tt.request_template_kwargs({"thinking": True})
    with pytest.raises(PinnedKwargError, match="clear_thinking") as error:
        tt.request_template_kwargs({"clear_thinking": True})
    assert error.value.http_status == 400


def test_stop_token_ids_are_the_family_stop_tokens_as_ints(qwen3_tokenizer: LocalTokenizer) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    assert tt.stop_token_ids == tuple(qwen3_tokenizer.convert_tokens_to_ids(t) for t in tt.family.stop_tokens)
    assert tt.stop_token_ids == (151645, 151643)


@pytest.mark.parametrize(
    ("family", "stop"), [(name, stop) for name in fixed_families() for stop in get_family(name).stop_tokens]
)
def test_every_stop_token_of_every_family_can_be_continued(family: str, stop: str) -> None:
    """Stored ids may end with any declared stop token: kept (or dropped, STOP_IS_NEXT_OPENER), closed with the
    family's declared text when the template never writes that token, then the appended render."""
    tt = family_tito(family)
    old, new = first_cut(tt)
    ended = simulated_stored_ids(tt, old)
    stop_id = tt.tokenizer.encode(stop, add_special_tokens=False)
    full = tt.tokenizer.encode(tt.render(new, TOOLS, add_generation_prompt=True), add_special_tokens=False)
    stored = [*ended[:-1], *stop_id]
    closing = tt.family.junction.closing_after(stop, tt.family.end_of_turn, tt.family.stop_closing)
    assert closing is not None, f"{family} declares no way to continue after {stop!r}"
    if tt.family.junction.trailing_ids_dropped:  # the sampled stop token goes; the render brings the real opener
        expected = full
    else:
        expected = [*stored, *tt.tokenizer.encode(closing, add_special_tokens=False), *full[len(ended) :]]
    merged = tt.merge_tokens(old, new, stored, TOOLS)
    assert merged == expected
    kept = tt.kept_stored_ids(stored)
    assert merged[:kept] == stored[:kept] and kept == len(stored) - tt.family.junction.trailing_ids_dropped


def test_a_stop_token_without_a_declared_closing_names_that_cause(qwen3_tokenizer: LocalTokenizer) -> None:
    family = dataclasses.replace(get_family("qwen3"), stop_closing={})
    tt = TitoTokenizer(qwen3_tokenizer, family)
    stored = [*stored_ids(qwen3_tokenizer, tt.render(HISTORY))[:-1], 151643]
    with pytest.raises(JunctionError, match=r"stop token 151643 '<\|endoftext\|>', after which .* no way") as error:
        tt.merge_tokens(HISTORY, [*HISTORY, {"role": "user", "content": "x"}], stored)
    assert (error.value.family, error.value.last_id) == ("qwen3", 151643)
    assert "cut" not in str(error.value)


@pytest.mark.parametrize("family", fixed_families())
def test_resending_exactly_the_stored_conversation_is_an_error_in_every_family(family: str) -> None:
    tt = family_tito(family)
    old, _ = first_cut(tt)
    with pytest.raises(AppendOnlyError, match="resending exactly the stored conversation") as error:
        tt.merge_tokens(old, old, simulated_stored_ids(tt, old), TOOLS)
    assert (error.value.index, error.value.field) == (len(old), "messages")


@pytest.mark.parametrize("family", fixed_families())
def test_an_empty_conversation_is_a_message_error_in_every_family(family: str) -> None:
    tt = family_tito(family)
    for call in (lambda: tt.render([]), lambda: tt.merge_tokens([], [], []), lambda: tt.render([], TOOLS, True)):
        with pytest.raises(MessageError, match="'messages': is empty") as error:
            call()
        assert error.value.index == 0


@pytest.mark.parametrize(
    ("old", "new", "argument"),
    [
        ({"role": "user"}, [], "old_messages"),
        ([], {"role": "user", "content": "x"}, "new_messages"),
        ([], "hi", "new_messages"),
    ],
)
def test_messages_that_are_not_a_list_name_the_argument(
    qwen3_tokenizer: LocalTokenizer, old: Any, new: Any, argument: str
) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    with pytest.raises(MessageError, match=f"'{argument}': must be a list of message objects") as error:
        tt.merge_tokens(old, new, [])
    assert error.value.field == argument


@pytest.mark.parametrize("field", ["content", "reasoning_content"])
def test_a_lone_surrogate_names_the_message_and_field(qwen3_tokenizer: LocalTokenizer, field: str) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    new = [*HISTORY, {"role": "user", "content": "ok"}]
    new[-1] = (
        {**new[-1], "role": "assistant", field: "ab\ud800c"}
        if field == "reasoning_content"
        else {"role": "user", "content": "ab\ud800c"}
    )
    with pytest.raises(MessageError, match=f"message 3: field '{field}': contains a lone surrogate at character 2"):
        tt.tokenize_additional_messages(HISTORY, new)


@pytest.mark.parametrize(
    ("ids", "position", "value"),
    [([1, 2, -1], 2, -1), ([1, 10**9], 1, 10**9), ([1, "2"], 1, "2"), ([0, 2.0], 1, 2.0), ([None], 0, None)],
)
def test_an_id_outside_the_vocabulary_or_not_an_int_names_the_argument_and_position(
    qwen3_tokenizer: LocalTokenizer, ids: list[Any], position: int, value: Any
) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    with pytest.raises(TokenIdError, match=rf"completion_ids\[{position}\]") as error:
        tt.parse_completion(ids)
    assert (error.value.argument, error.value.position, error.value.value) == ("completion_ids", position, value)
    new = [*HISTORY, {"role": "user", "content": "x"}]
    with pytest.raises(TokenIdError, match=rf"stored_ids\[{position}\]") as error:
        tt.merge_tokens(HISTORY, new, ids)
    assert error.value.http_status == 400
    with pytest.raises(TokenIdError, match=r"stored_ids\[0\]"):
        tt.merge_tokens(HISTORY, new, "1 2 3")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("new", "index"), [([*HISTORY, "hi"], 3), (["hi", *HISTORY[1:], {"role": "user", "content": "x"}], 0)]
)
def test_a_message_that_is_not_an_object_names_its_index(
    qwen3_tokenizer: LocalTokenizer, new: list[Any], index: int
) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    with pytest.raises(MessageError, match=f"message {index}: field 'message': must be an object, not str"):
        tt.tokenize_additional_messages(HISTORY, new)


@pytest.mark.parametrize(
    ("tools", "where"),
    [
        ("get_weather", "tools[0]: field 'tools': must be a list of tool objects, not str"),
        ([{"type": "function"}, 3], "tools[1]: field 'tool': must be an object, not int"),
        (
            [{"type": "function", "function": {"name": "f", "description": "a\ud800"}}],
            "tools[0]: field 'function.description': contains a lone surrogate at character 1",
        ),
    ],
)
def test_bad_tool_definitions_name_the_tool_and_field(qwen3_tokenizer: LocalTokenizer, tools: Any, where: str) -> None:
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    for call in (lambda: tt.merge_tokens([], HISTORY[:2], [], tools), lambda: tt.render(HISTORY, tools)):
        with pytest.raises(ToolDefinitionError, match=re.escape(where)):
            call()


def test_numpy_stored_ids_come_back_as_plain_ints() -> None:
    """Ids a trainer kept in numpy stay valid, and the prompt holds plain ints (JSON for the engine)."""
    import numpy as np

    tt = family_tito("qwen3")
    old = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    stored = simulated_stored_ids(tt, old, None)
    merged = tt.merge_tokens(old, [*old, {"role": "user", "content": "x"}], list(np.array(stored)))
    assert merged[: len(stored)] == stored and all(type(token) is int for token in merged)


def test_recorded_ids_merge_and_parse_like_the_checked_calls_without_walking_the_stored_ids(
    qwen3_tokenizer: LocalTokenizer,
) -> None:
    """A session's own stored ids (an int array) give the same prompt as merge_tokens; neither the recorded merge
    nor parse_built_completion reads the stored/prompt ids one by one (only the sampled ids are checked)."""
    tt = get_tito_tokenizer(qwen3_tokenizer, "qwen3")
    stored = stored_ids(qwen3_tokenizer, tt.render(HISTORY))
    new = [*HISTORY, {"role": "user", "content": "Next"}]

    class NoWalk(array.array):  # type: ignore[type-arg]
        """Slicing (a C copy) and the last id are fine; iterating every id is what the per-turn path avoids."""

        def __iter__(self) -> Any:
            raise AssertionError("the stored ids were walked one by one")

    recorded = NoWalk("i", stored)
    merged = tt.merge_recorded_tokens(HISTORY, new, recorded)
    assert isinstance(merged, memoryview) and merged.format == "i"  # the engine clients write it from its buffer
    split = PathIds([NoWalk("i", stored[:5]), NoWalk("i", stored[5:])])  # a session's path, as its nodes hold it
    assert tt.merge_recorded_tokens(HISTORY, new, split) == merged
    assert merged.tolist() == tt.merge_tokens(HISTORY, new, stored)
    assert all(type(token) is int for token in tt.merge_tokens(HISTORY, new, stored))
    with pytest.raises(AssertionError, match="walked"):
        tt.merge_tokens(HISTORY, new, recorded)  # the public call checks every id
    answer = {"role": "assistant", "content": "Fine."}
    sampled = stored_ids(qwen3_tokenizer, tt.render([*new, answer]))[len(merged) :]
    prompt = NoWalk("i", merged)
    assert tt.parse_built_completion(sampled, prompt).message["content"] == "Fine."
    with pytest.raises(TokenIdError, match=r"completion_ids\[1\]"):
        tt.parse_built_completion([sampled[0], -1], prompt)
