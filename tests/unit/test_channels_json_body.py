"""load_json: bounded decoding, a reason for every refusal, lone surrogates repaired."""

from __future__ import annotations

import json

import pytest

from channels import MalformedPayload
from channels.json_body import MAX_JSON_DEPTH, load_json, repair_text


def test_nesting_up_to_the_limit_is_accepted() -> None:
    text = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert load_json(text) == json.loads(text)


def test_one_level_more_is_refused() -> None:
    depth = MAX_JSON_DEPTH + 1
    with pytest.raises(MalformedPayload, match="nested deeper than 32 levels"):
        load_json('{"a":' * depth + "1" + "}" * depth)


@pytest.mark.parametrize(
    "text", ["[" * 5000 + "]" * 5000, "[" * 100_000, '{"a":' * 5000, "[{" * 3000 + "}]" * 3000]
)
def test_hostile_nesting_never_raises_anything_else(text: str) -> None:
    with pytest.raises(MalformedPayload, match=r"nested|not JSON"):
        load_json(text)


def test_escaped_quotes_and_brackets_in_strings_do_not_count() -> None:
    text = '{"a": "\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\"", "b": ["]]]]"]}'
    assert load_json(text) == {"a": '"' + "[" * 37 + '"', "b": ["]]]]"]}


def test_huge_integer_is_refused_not_raised() -> None:
    with pytest.raises(MalformedPayload, match=r"not JSON: Exceeds the limit"):
        load_json("1" * 5000, what="response_json")


def test_the_reason_names_what_was_decoded() -> None:
    with pytest.raises(MalformedPayload, match=r"^response_json is not JSON"):
        load_json("{", what="response_json")


def test_lone_surrogates_are_repaired_everywhere() -> None:
    data = load_json('{"\\ud800k": ["a\\udfffb", {"c": "\\ud83d\\ude00"}]}')
    assert data == {"\ufffdk": ["a\ufffdb", {"c": "😀"}]}


def test_repair_text() -> None:
    assert repair_text("ok") == "ok"
    assert repair_text("a\ud800") == "a\ufffd"


def test_alternating_brackets_count_every_level() -> None:
    def nested(depth: int) -> str:
        opening = "".join('{"a":' if i % 2 else "[" for i in range(depth))
        closing = "".join("}" if i % 2 else "]" for i in reversed(range(depth)))
        return opening + "1" + closing

    assert load_json(nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(MalformedPayload, match="nested deeper"):
        load_json(nested(MAX_JSON_DEPTH + 1))
