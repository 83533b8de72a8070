"""Reading a finished research job: claims, citations, markers and billed searches."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import Response

from deep_research.adapters.web.output import MAX_CLAIM_CHARS, claim_of, extract_report, usage_of
from deep_research.core.citations import identity, register
from deep_research.core.errors import BranchError
from deep_research.core.models import Citation
from deep_research.core.scope import WebScope

CHROMA = "https://docs.trychroma.com/scale"
QDRANT = "https://qdrant.tech/documentation/quantization"
CHROMA_LINK = f"([trychroma.com]({CHROMA}))"
QDRANT_LINK = f"([qdrant.tech]({QDRANT}))"


def annotation(text: str, span: str, url: str, occurrence: int = 0) -> dict[str, Any]:
    """A `url_citation` over the ``occurrence``-th copy of ``span`` in ``text``."""
    start = -1
    for _ in range(occurrence + 1):
        start = text.index(span, start + 1)
    return {
        "type": "url_citation",
        "url": url,
        "title": f"Title of {url}",
        "start_index": start,
        "end_index": start + len(span),
    }


def response(text: str, annotations: list[dict[str, Any]], **fields: Any) -> Response:
    """A completed reply shaped like today's: reasoning, searches, then the message."""
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": annotations}],
    }
    output = [
        {"id": "rs_1", "type": "reasoning", "summary": []},
        *fields.pop("output", []),
        message,
    ]
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "gpt-5.5",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [{"type": "web_search"}],
            **fields,
        }
    )


def test_two_claims_citing_one_page_are_two_citations() -> None:
    text = (
        f"Chroma scales to 10M vectors {CHROMA_LINK}. "
        f"Chroma runs embedded in the application process {CHROMA_LINK}."
    )
    anns = [annotation(text, CHROMA_LINK, CHROMA, i) for i in (0, 1)]

    marked, citations, _ = extract_report(response(text, anns))

    assert marked == (
        "Chroma scales to 10M vectors[1]. Chroma runs embedded in the application process[2]."
    )
    assert [(c.url, c.claim) for c in citations] == [
        (CHROMA, "Chroma scales to 10M vectors."),
        (CHROMA, "Chroma runs embedded in the application process."),
    ]
    assert identity(citations[0]) != identity(citations[1])
    assert all(c.quote == "" and c.kind == "web" for c in citations), "no page text comes back"


def test_one_claim_cited_twice_by_a_page_is_one_citation() -> None:
    text = f"Qdrant supports scalar quantization {QDRANT_LINK} {QDRANT_LINK}. Chroma is embedded."
    anns = [annotation(text, QDRANT_LINK, QDRANT, i) for i in (0, 1)]
    anns.append(annotation(text, QDRANT_LINK, QDRANT, 0))  # the very same annotation again

    marked, citations, _ = extract_report(response(text, anns))

    assert [c.claim for c in citations] == ["Qdrant supports scalar quantization."]
    assert marked == "Qdrant supports scalar quantization[1]. Chroma is embedded."


def test_the_reader_sees_markers_where_the_links_were() -> None:
    text = (
        "## Scale\n\n"
        f"- Chroma scales to 10M vectors {CHROMA_LINK}.\n"
        f"- Qdrant quantizes vectors to save memory. {QDRANT_LINK}\n\n"
        f"See [the Qdrant guide]({QDRANT}) for tuning."
    )
    anns = [
        annotation(text, CHROMA_LINK, CHROMA),
        annotation(text, QDRANT_LINK, QDRANT),
        annotation(text, f"[the Qdrant guide]({QDRANT})", QDRANT),
    ]

    marked, citations, _ = extract_report(response(text, anns))

    assert marked == (
        "## Scale\n\n"
        "- Chroma scales to 10M vectors[1].\n"
        "- Qdrant quantizes vectors to save memory.[2]\n\n"
        "See the Qdrant guide[3] for tuning."
    )
    assert "](" not in marked
    assert "https://" not in marked
    assert [c.claim for c in citations] == [
        "Chroma scales to 10M vectors.",
        # A link after the full stop cites the sentence before it.
        "Qdrant quantizes vectors to save memory.",
        # A link that is part of the wording keeps its words.
        "See the Qdrant guide for tuning.",
    ]


def test_a_span_over_the_claim_itself_stays_and_is_the_claim() -> None:
    text = "Chroma scales to 10M vectors. Qdrant supports quantization."
    marked, citations, _ = extract_report(
        response(text, [annotation(text, "Qdrant supports quantization.", QDRANT)])
    )
    assert marked == "Chroma scales to 10M vectors. Qdrant supports quantization.[1]"
    assert [c.claim for c in citations] == ["Qdrant supports quantization."]


def test_sentence_ends_inside_links_do_not_cut_the_claim() -> None:
    text = f"Version 1.5 of Chroma (see [docs.trychroma.com]({CHROMA}?v=1.5)) adds sharding."
    span = f"[docs.trychroma.com]({CHROMA}?v=1.5)"
    assert claim_of(text, text.index(span), text.index(span) + len(span)) == (
        "Version 1.5 of Chroma (see docs.trychroma.com) adds sharding."
    )


def test_a_long_sentence_keeps_the_part_leading_to_the_citation() -> None:
    text = "Intro words " * 100 + f"and finally the cited fact {CHROMA_LINK}."
    start = text.index(CHROMA_LINK)
    claim = claim_of(text, start, start + len(CHROMA_LINK))
    assert claim.startswith("… ")
    assert claim.endswith("and finally the cited fact.")
    assert len(claim) <= MAX_CLAIM_CHARS + 2


def test_session_registry_keeps_claims_apart_and_merges_repeats() -> None:
    def web(url: str, claim: str) -> Citation:
        return Citation(kind="web", url=url, locator=url, claim=claim)

    sources: dict[str, Citation] = {}
    notes, _ = register(
        sources, "Scales [1]. Embedded [2].", [web(CHROMA, "Scales."), web(CHROMA, "Embedded.")]
    )
    assert notes == "Scales [S1]. Embedded [S2]."
    # Another node makes the same claim from the same page (spacing and case aside).
    notes, _ = register(sources, "Again [1].", [web(CHROMA, "  scales. ")])
    assert notes == "Again [S1]."
    # Citations saved before claims existed still merge by url.
    register(sources, "", [web(QDRANT, ""), web(QDRANT, "")])
    assert list(sources) == ["S1", "S2", "S3"]


def search(action: dict[str, Any], n: int) -> dict[str, Any]:
    return {"id": f"ws_{n}", "type": "web_search_call", "status": "completed", "action": action}


SEARCHES = [
    search({"type": "search", "queries": ["chroma scale", "chroma limits"]}, 1),
    search({"type": "search", "query": "qdrant quantization"}, 2),
    search({"type": "open_page", "url": CHROMA}, 3),
    search({"type": "find_in_page", "url": CHROMA, "pattern": "10M"}, 4),
]


def test_web_searches_come_from_the_billed_tool_usage() -> None:
    tool_usage = {
        "image_gen": {
            "input_tokens": 0,
            "input_tokens_details": {"image_tokens": 0, "text_tokens": 0},
            "output_tokens": 0,
            "total_tokens": 0,
        },
        "web_search": {"num_requests": 7},
    }
    usage = {
        "input_tokens": 1000,
        "input_tokens_details": {"cached_tokens": 200, "cache_write_tokens": 0},
        "output_tokens": 500,
        "output_tokens_details": {"reasoning_tokens": 300},
        "total_tokens": 1500,
    }
    reply = response("Done.", [], output=SEARCHES, tool_usage=tool_usage, usage=usage)
    got = usage_of(reply)
    assert got.web_search_calls == 7
    assert (got.input_tokens, got.cached_input_tokens, got.output_tokens) == (1000, 200, 500)
    assert got.reasoning_tokens == 300


def test_without_tool_usage_searches_are_counted_by_query_not_page_opens() -> None:
    # Two queries, then a search with one; opening a page and finding in it are not billed.
    assert usage_of(response("Done.", [], output=SEARCHES)).web_search_calls == 3


def test_bracketed_numbers_in_the_report_text_stay_literal() -> None:
    text = f"Chroma shipped it in [2024] and scales to [2] clusters {CHROMA_LINK}."
    notes, citations, _ = extract_report(response(text, [annotation(text, CHROMA_LINK, CHROMA)]))
    assert notes == r"Chroma shipped it in \[2024\] and scales to \[2\] clusters[1]."
    sources: dict[str, Citation] = {}
    registered, _ = register(sources, notes, citations)
    assert registered == r"Chroma shipped it in \[2024\] and scales to \[2\] clusters[S1]."


# --- citations outside the web scope ------------------------------------------------------

SOURCES = st.sampled_from(["in", "out", "both", "none"])
LAYOUTS = st.sampled_from([" ", "\n", "\n\n", "\n- "])


@given(
    st.lists(st.tuples(SOURCES, LAYOUTS), min_size=1, max_size=6),
    st.sampled_from(["", "- "]),
    st.booleans(),
)
def test_a_sentence_whose_only_sources_are_out_of_scope_is_taken_out(
    sentences: list[tuple[str, str]], lead: str, after_the_stop: bool
) -> None:
    """Whatever the layout (within a line, a line, a bullet, a link before or after the
    full stop): a sentence cited only outside the scope is gone, words, links and all; every
    other sentence stays with its markers."""
    text, anns = lead, []
    for i, (cited, layout) in enumerate(sentences):
        urls = {
            "in": [f"https://in.example/{i}"],
            "out": [f"https://out.example/{i}"],
            "both": [f"https://in.example/{i}", f"https://out.example/{i}"],
            "none": [],
        }[cited]
        links = " ".join(f"([site]({u}))" for u in urls)
        words = f"Word{i}a word{i}b"
        said = f"{words}. {links}" if after_the_stop and links else f"{words} {links}".strip() + "."
        start = len(text)
        text += said
        for url in urls:
            link = f"([site]({url}))"
            at = text.index(link, start)
            anns.append(
                {
                    "type": "url_citation",
                    "url": url,
                    "title": "t",
                    "start_index": at,
                    "end_index": at + len(link),
                }
            )
        text += layout if i < len(sentences) - 1 else ""
    scope = WebScope(exclude_domains=("out.example",))
    kept = [i for i, (cited, _) in enumerate(sentences) if cited != "out"]
    if not kept:
        with pytest.raises(BranchError, match="no report text"):
            extract_report(response(text, anns), scope)
        return
    marked, citations, dropped = extract_report(response(text, anns), scope)
    for i, (cited, _) in enumerate(sentences):
        assert (f"Word{i}a word{i}b" in marked) == (cited != "out"), (i, marked)
    assert "out.example" not in marked
    assert "](" not in marked, "no link is left behind"
    cited = [i for i, (c, _) in enumerate(sentences) if c in ("in", "both")]
    assert [(c.url, c.claim) for c in citations] == [
        (f"https://in.example/{i}", f"Word{i}a word{i}b.") for i in cited
    ]
    assert dropped == [
        f"https://out.example/{i}" for i, (c, _) in enumerate(sentences) if c in ("out", "both")
    ]
    assert re.findall(r"\[(\d+)\]", marked) == [str(n) for n in range(1, len(citations) + 1)]
    assert not re.search(r"^- *$", marked, re.MULTILINE), "no bullet left empty"
