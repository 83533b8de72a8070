"""Reading a JSON object out of model text (``adapters.llm.replies``), with generated
inputs: what models really write around an object, cut-off tails, and arbitrary text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deep_research.adapters.llm.replies import json_object_in

scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
objects = st.dictionaries(st.text(max_size=10), values, min_size=1, max_size=5)
prose = st.text(alphabet=st.characters(blacklist_characters="{`"), max_size=60)


@settings(max_examples=50)
@given(obj=objects, before=prose, after=st.text(max_size=60), indent=st.sampled_from([None, 2]))
def test_an_object_is_found_whatever_prose_surrounds_it(
    obj: dict[str, Any], before: str, after: str, indent: int | None
) -> None:
    text = json.dumps(obj, indent=indent)
    assert json_object_in(f"{before}{text}{after}") == obj


@settings(max_examples=50)
@given(
    obj=objects,
    before=prose,
    after=st.text(max_size=60),
    label=st.sampled_from(["json", "JSON", "", "javascript"]),
)
def test_an_object_in_a_fence_is_found(
    obj: dict[str, Any], before: str, after: str, label: str
) -> None:
    text = f"{before}\n\n```{label}\n{json.dumps(obj, indent=2)}\n```\n{after}"
    assert json_object_in(text) == obj


@settings(max_examples=50)
@given(obj=objects, data=st.data())
def test_a_cut_off_object_is_closed_or_refused_never_crashes(
    obj: dict[str, Any], data: st.DataObject
) -> None:
    text = json.dumps(obj)
    cut = data.draw(st.integers(min_value=1, max_value=len(text)))
    try:
        found = json_object_in(text[:cut])
    except ValueError:
        return
    assert isinstance(found, dict)


@settings(max_examples=300)
@given(text=st.text(max_size=400))
def test_any_text_gives_an_object_or_a_value_error(text: str) -> None:
    try:
        found: dict[str, Any] | str = json_object_in(text)
    except ValueError as exc:
        found = str(exc)
    assert isinstance(found, dict) or "reply" in found, "a dict, or a reason naming the reply"


def test_what_a_small_model_writes_is_read() -> None:
    reply = (
        "Sure! Here is the plan you asked for:\n\n```json\n"
        '{"rationale": "split it", "tasks": [{"id": "t1", "question": "What is X?"}]}\n'
        "```\n\nI hope this helps {really}."
    )
    assert json_object_in(reply)["tasks"][0]["id"] == "t1"
    truncated = '{"rationale": "split it", "tasks": [{"id": "t1", "question": "What is'
    assert json_object_in(truncated) == {
        "rationale": "split it",
        "tasks": [{"id": "t1", "question": "What is"}],
    }


@pytest.mark.parametrize(
    ("text", "problem"),
    [("", "empty"), ("   \n", "empty"), ("no braces at all", "no JSON object"), ("[1, 2]", "no")],
)
def test_a_reply_without_an_object_names_the_problem(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        json_object_in(text)


def test_deep_nesting_is_refused_not_a_crash() -> None:
    with pytest.raises(ValueError, match="no JSON object"):
        json_object_in("[" * 100_000)
    with pytest.raises(ValueError, match="no JSON object"):
        json_object_in('{"a":' * 50_000)
