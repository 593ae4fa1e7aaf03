"""ids_json: an engine body's prompt ids written from an int array's buffer are the JSON the list of ints gives."""

from __future__ import annotations

from array import array

import numpy
import orjson
import pytest

from tito.engines.id_json import ids_json

IDS = [0, 1, 198, 151643, 151645, 2**31 - 1]


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
