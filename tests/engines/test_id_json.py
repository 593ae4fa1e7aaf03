"""ids_json: an engine body's prompt ids written from an int array's buffer are the JSON the list of ints gives."""

from __future__ import annotations

from array import array

import numpy
import orjson
import pytest

from tito.engines.id_json import PromptJson, PromptText, body_json, ids_json
from tito.prompt_buffers import PromptBuffers

IDS = [0, 1, 198, 151643, 151645, 2**31 - 1]


def written(prompt: object) -> bytes:
    """The JSON `body_json` writes for `prompt` as a body's field."""
    return b"".join(body_json({"ids": prompt}))[len(b'{"ids":') : -1]


@pytest.mark.parametrize("typecode", ["i", "l", "q", "I", "L", "Q"])
def test_an_int_array_gives_the_json_of_its_ints(typecode: str) -> None:
    assert orjson.dumps({"input_ids": ids_json(array(typecode, IDS))}) == orjson.dumps({"input_ids": IDS})


def test_negative_and_small_typecodes_keep_their_values() -> None:
    assert orjson.loads(orjson.dumps(ids_json(array("b", [-128, 0, 127])))) == [-128, 0, 127]
    assert orjson.loads(orjson.dumps(ids_json(array("h", [-1, 2])))) == [-1, 2]


@pytest.mark.parametrize("ids", [[], array("i"), (), range(0)])
def test_no_ids_are_an_empty_json_array(ids: object) -> None:
    assert orjson.dumps(ids_json(ids)) == b"[]"  # type: ignore[arg-type]


@pytest.mark.parametrize("ids", [IDS, tuple(IDS), range(5), [numpy.int64(value) for value in IDS]])
def test_any_other_sequence_of_ints_gives_the_same_json(ids: object) -> None:
    assert orjson.loads(orjson.dumps(ids_json(ids))) == [int(value) for value in ids]  # type: ignore[arg-type,attr-defined]


def test_a_prompt_that_extends_the_sessions_previous_one_is_written_as_an_extension_byte_for_byte() -> None:
    prompts = PromptJson()
    first = array("i", [151644, 8948, 198, 151645])
    second = array("i", [*first, 77, 151645, 198, 151644, 872])
    third = array("i", [*second, 5])
    for ids in (first, second, second, third):  # the same prompt again (an engine retry) extends by nothing
        assert written(prompts.ids_json(ids, "s")) == orjson.dumps(ids.tolist())
    assert prompts.extended == 3


def test_one_id_array_grown_in_place_turn_after_turn_is_extended_and_stays_resizable() -> None:
    """A session's prompt is one array that grows: the kept ids are a copy extended in place, not a view of it (the
    array stays resizable), and a turn that rewrites the history after extensions is written whole."""
    prompts = PromptJson()
    ids = array("i", [1, 2, 3])
    for step in range(3):
        ids.extend([10 + step, 11 + step])  # would raise BufferError if a view of `ids` were kept
        assert written(prompts.ids_json(ids, "s")) == orjson.dumps(ids.tolist())
    assert prompts.extended == 2
    ids[2] = 99
    assert written(prompts.ids_json(ids, "s")) == orjson.dumps(ids.tolist())
    assert prompts.extended == 2
    prompts.forget("s")
    assert prompts.held_bytes == 0


def test_prompts_written_over_one_buffer_are_extended_and_leave_it_free() -> None:
    """A server's prompts are int32 views of buffers later prompts write over (`tito.prompt_buffers`): each is
    written byte for byte, extended from the one before, and nothing keeps a view (the next write reuses it)."""
    prompts, buffers = PromptJson(), PromptBuffers()
    ids = array("i", [151644, 8948, 198])
    for step in range(4):
        ids.extend([20 + step, 151645])
        prompt = buffers.write((ids,))
        assert written(ids_json(prompt)) == written(prompts.ids_json(prompt, "s")) == orjson.dumps(ids.tolist())
        del prompt
    assert prompts.extended == 3 and buffers.reused == 3


def test_a_prompt_that_does_not_start_with_an_earlier_one_is_written_whole() -> None:
    prompts = PromptJson()
    prompts.ids_json(array("i", [1, 2, 3]), "s")
    changed = array("i", [1, 9, 3, 4])  # same length prefix, another id: never taken as an extension
    assert written(prompts.ids_json(changed, "s")) == b"[1,9,3,4]"
    assert written(prompts.ids_json(array("i", [1, 2, 3, 4]), "t")) == b"[1,2,3,4]"  # another session
    assert prompts.extended == 0


def test_interleaved_conversations_of_one_session_each_extend_their_own_prompt() -> None:
    prompts = PromptJson()
    main, agent = array("i", [1, 2]), array("i", [7, 8])
    for step in range(3):
        main, agent = array("i", [*main, 10 + step]), array("i", [*agent, 20 + step])
        assert written(prompts.ids_json(main, "s")) == orjson.dumps(main.tolist())
        assert written(prompts.ids_json(agent, "s")) == orjson.dumps(agent.tolist())
    assert prompts.extended == 4


def test_the_cache_is_bounded_and_a_released_session_is_forgotten() -> None:
    prompts = PromptJson(max_bytes=40)  # one 5-id prompt: 20 bytes of ids, 11 of JSON
    prompts.ids_json(array("i", range(5)), "a")
    prompts.ids_json(array("i", range(5)), "b")
    assert prompts.held_bytes <= 40
    prompts.ids_json(array("i", range(6)), "a")
    assert prompts.extended == 0, "a's prompt left first (least recently used) to keep the bound"
    prompts.forget("b")
    prompts.forget("a")
    assert prompts.held_bytes == 0
    assert written(prompts.ids_json([1, 2], "a")) == b"[1,2]"  # a list, not an id array: written whole
    assert written(prompts.ids_json(array("i", [1, 2]), None)) == b"[1,2]"


@pytest.mark.parametrize("before", [{}, {"model": "m"}, {"model": "m", "n": [1, {"a": None}]}])
@pytest.mark.parametrize("after", [{}, {"rid": 'r\u00e9"', "stream": False, "p": {"x": 1.5}}])
def test_a_body_with_prompt_pieces_is_the_json_of_the_body_with_the_ids_in_their_place(
    before: dict[str, object], after: dict[str, object]
) -> None:
    prompts = PromptJson()
    ids = array("i", [5, 6])
    for step in range(3):
        ids.append(step)
        prompt = prompts.ids_json(ids, "s")
        assert isinstance(prompt, PromptText)
        pieces = body_json({**before, "input_ids": prompt, **after})
        assert b"".join(pieces) == orjson.dumps({**before, "input_ids": ids.tolist(), **after})
        assert all(piece is kept for piece, kept in zip(pieces[1:-1], prompt.pieces, strict=True))  # not copied
    assert body_json({**before, **after}) == [orjson.dumps({**before, **after})]


def test_a_long_sessions_prompt_pieces_are_joined_into_one_now_and_then() -> None:
    prompts = PromptJson()
    ids = array("i", [1])
    for step in range(100):
        ids.append(step)
        prompt = prompts.ids_json(ids, "s")
        assert isinstance(prompt, PromptText)
        assert len(prompt.pieces) <= PromptText.MAX_PIECES
        assert written(prompt) == orjson.dumps(ids.tolist())
        assert prompt.size == len(written(prompt))
    assert prompts.extended == 99
