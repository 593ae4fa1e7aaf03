"""TitoTokenizer's contract: role gate, pinned kwargs, verbatim stored ids, loud failures."""

from __future__ import annotations

import pytest

from tito import VALID_APPEND_ROLES, get_tito_tokenizer
from tito.errors import (
    AppendOnlyError,
    ConfigurationError,
    JunctionError,
    PinnedKwargError,
    RoleNotAllowedError,
    TokenMismatchError,
)
from tito.families import fixed_families, get_family
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
    with pytest.raises(RoleNotAllowedError, match="message 3 has role 'user'") as error:
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
