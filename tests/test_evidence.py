"""The evidence store: a finished node's findings kept beside state.json, each with the
source text its citations rest on; read back a page at a time, ranked for a query."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deep_research.app import saved
from deep_research.app.config import Settings
from deep_research.core.errors import UsageError
from deep_research.core.evidence import findings, source_texts, units_of
from deep_research.core.models import Citation, EvidenceUnit, ResearchNode
from deep_research.kb.embeddings import make_embeddings
from deep_research.persistence.evidence import (
    FILE_NAME,
    VECTORS_NAME,
    SessionEvidence,
    read_units,
    read_vectors,
)
from deep_research.persistence.sessions import SessionStore
from tests.clirun import cli, run_json, session_state
from tests.conftest import NOTES
from tests.fake_openai import FakeOpenAI
from tests.world import ResearchWorld, plan_task, verdict

NOTES_OF_A_BRANCH = """## Findings

- Raft elects a leader by majority vote [S1].
- ok [S2]

Each term has at most one leader [S1]. Followers redirect clients to it. [S2] Short.

```
code is not a finding at all
```
| a header is | not one |
|---|---|
| a table row | is one too [S3] |
"""


def test_findings_are_the_bullets_and_sentences_of_the_notes() -> None:
    assert findings(NOTES_OF_A_BRANCH) == [
        "Raft elects a leader by majority vote [S1].",
        "Each term has at most one leader [S1].",
        "Followers redirect clients to it. [S2]",
        "a table row | is one too [S3]",
    ]


def test_each_ref_rests_on_its_source_text_or_on_what_the_job_said() -> None:
    sources = {
        "S1": Citation(ref="S1", kind="kb", locator="kb/raft.md#Raft:1-9", quote="Raft elects…"),
        "S2": Citation(ref="S2", kind="web", url="https://a.example/", claim="Followers redirect."),
        "S3": Citation(ref="S3", kind="web", url="https://b.example/", quote="A passage read."),
    }
    node = ResearchNode(
        id="t1",
        question="How does Raft elect?",
        notes="Raft elects a leader by majority [S1][S3]. Followers redirect clients [S2]. "
        "An unknown ref stays out of the refs [S9].",
    )
    chunk = "Raft elects a leader by majority vote; the whole chunk, longer than its quote."
    units = units_of(node, sources, {"S1": chunk})
    assert [u.id for u in units] == ["t1.1", "t1.2", "t1.3"]
    first, second, third = units
    assert first.refs == ["S1", "S3"]
    assert first.question == "How does Raft elect?"
    assert [(s.ref, s.text, s.said) for s in first.sources] == [
        ("S1", chunk, ""),  # the whole chunk, not the clipped quote
        ("S3", "A passage read.", ""),
    ]
    # A research job gives no page text: its own sentence is what it said, kept apart.
    assert [(s.text, s.said) for s in second.sources] == [("", "Followers redirect.")]
    assert third.refs == []
    assert third.sources == []


def test_source_texts_line_up_with_the_registered_refs() -> None:
    registered = [Citation(ref="S4", kind="kb"), Citation(ref="S2", kind="kb")]
    assert source_texts(registered, ("four", "")) == {"S4": "four"}
    assert source_texts(registered, ()) == {}


def unit(node_id: str, n: int, finding: str = "A finding of some length.") -> EvidenceUnit:
    return EvidenceUnit(id=f"{node_id}.{n}", node_id=node_id, question="Q?", finding=finding)


async def test_a_rerun_node_replaces_its_units_and_a_torn_line_is_skipped(
    tmp_path: Path,
) -> None:
    store = SessionEvidence(tmp_path)
    await store.keep("t1", [unit("t1", 1), unit("t1", 2)])
    await store.keep("t2", [unit("t2", 1)])
    await store.keep("t1", [unit("t1", 1, "Rerun after a crash: the same ids, new text.")])
    with (tmp_path / FILE_NAME).open("a") as out:
        out.write('{"batch": "x", "node_id": "t3", "id": "t3.1", "fin')  # cut by a crash
    units = read_units(tmp_path)
    assert [u.id for u in units] == ["t2.1", "t1.1"]
    assert units[1].finding.startswith("Rerun")
    await store.keep("t2", [])  # a rerun that found nothing: none left
    assert [u.id for u in read_units(tmp_path)] == ["t1.1"]
    assert read_units(tmp_path / "nowhere") == []


def test_a_run_keeps_its_findings_with_the_whole_chunks_they_cite(
    kb_env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(
        plans=[[plan_task("k1", source="internal"), plan_task("k2", source="internal")]],
        verdicts=[verdict(True)],
    ).install(fake_openai)
    data = run_json(kb_env, "When does a research node start?", "--kb-only")
    assert data["status"] == "complete"
    home = Path(kb_env["DEEP_RESEARCH_HOME"])
    session_dir = home / "sessions" / data["session_id"]
    units = read_units(session_dir)
    state = session_state(kb_env, data["session_id"])
    assert state["evidence_units"] == len(units) > 0, "counted in state.json, kept beside it"
    assert "evidence" not in json.dumps(state["nodes"]), "the units are not in state.json"
    assert {u.node_id for u in units} == {"k1", "k2"}
    chunks = [" ".join(text.split()) for text in NOTES.values()]
    cited = [s for u in units for s in u.sources]
    assert cited, "the KB branch's findings cite chunks"
    for source in cited:
        quote = state["sources"][source.ref]["quote"]
        assert len(source.text) >= len(quote)
        assert any(" ".join(source.text.split())[:40] in chunk for chunk in chunks)

    code, out, err = cli(kb_env, "sessions", "show", data["session_id"], "--json")
    assert code == 0, err
    assert json.loads(out)["evidence_units"] == len(units)


def _store_of_three(tmp_path: Path) -> tuple[Settings, str, Path]:
    settings = Settings(_env_file=None, home=tmp_path, embedding_provider="local-fast")  # type: ignore[call-arg]
    store = SessionStore(settings.sessions_dir)
    state = store.create("How are costs capped?")
    session_dir = store.path(state.session_id)
    SessionEvidence(session_dir).append(
        "t1",
        [
            unit("t1", 1, "The scheduler starts a node when its dependencies are done."),
            unit("t1", 2, "Each web job reserves its worst-case cost before it starts."),
            unit("t1", 3, "Reports list their sources with numbered citations."),
        ],
    )
    return settings, state.session_id, session_dir


def test_evidence_reads_a_page_at_a_time_and_ranks_for_a_query(tmp_path: Path) -> None:
    settings, session_id, session_dir = _store_of_three(tmp_path)
    page = saved.read_evidence(settings, session_id, limit=2)
    assert (page.total, [u.id for u in page.units]) == (3, ["t1.1", "t1.2"])
    assert [u.id for u in saved.read_evidence(settings, session_id, offset=2).units] == ["t1.3"]
    ranked = saved.read_evidence(settings, session_id, query="worst-case cost reserved")
    assert ranked.units[0].id == "t1.2"
    # Each unit embedded once, under the embedder's identity; another embedder's are not used.
    model_id = make_embeddings(settings.kb).model_id
    every = saved.read_evidence(settings, session_id).units
    assert set(read_vectors(session_dir, model_id)) == {u.finding for u in every}
    assert read_vectors(session_dir, "another-embedder") == {}
    with pytest.raises(UsageError, match="limit"):
        saved.read_evidence(settings, session_id, limit=0)


def test_damaged_lines_are_skipped_and_counted_never_raised(tmp_path: Path) -> None:
    settings, session_id, session_dir = _store_of_three(tmp_path)
    with (session_dir / FILE_NAME).open("ab") as out:
        out.write(b"5\n")  # a scalar
        out.write(b"[" * 100_000 + b"\n")  # nesting too deep for the parser
        out.write(b'{"batch": "x"}\n')  # an object that is no unit
        out.write(b"\n")  # a blank line is no damage
    page = saved.read_evidence(settings, session_id, query="worst-case cost")
    assert page.total == 3
    assert page.units[0].id == "t1.2"
    assert page.damage == f"3 damaged line(s) of {FILE_NAME} skipped"
    assert saved.read_evidence(settings, session_id).damage == page.damage


def test_an_evidence_store_that_is_a_directory_reads_as_none_and_says_so(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, home=tmp_path)  # type: ignore[call-arg]
    store = SessionStore(settings.sessions_dir)
    state = store.create("How are costs capped?")
    (store.path(state.session_id) / FILE_NAME).mkdir()
    page = saved.read_evidence(settings, state.session_id, query="cost")
    assert (page.total, page.units) == (0, [])
    assert page.damage.startswith(f"{FILE_NAME} could not be read")


@pytest.mark.parametrize("damage", ["not a zip", "0-d arrays", "wrong dimension", "ints"])
def test_damaged_vectors_are_made_again_not_an_error(tmp_path: Path, damage: str) -> None:
    import numpy as np

    settings, session_id, session_dir = _store_of_three(tmp_path)
    model_id = make_embeddings(settings.kb).model_id
    path = session_dir / VECTORS_NAME
    texts = [u.finding for u in read_units(session_dir)]
    if damage == "not a zip":
        path.write_bytes(b"PK\x03\x04 not really")
    elif damage == "0-d arrays":
        np.savez(path, embedder=np.array(model_id), texts=np.array("x"), vectors=np.array(1.0))
    elif damage == "wrong dimension":
        vectors = np.ones((len(texts), 3), dtype=np.float32)
        np.savez(path, embedder=np.array(model_id), texts=np.array(texts), vectors=vectors)
    else:
        vectors = np.ones((len(texts), 3), dtype=np.int64)
        np.savez(path, embedder=np.array(model_id), texts=np.array(texts), vectors=vectors)

    ranked = saved.read_evidence(settings, session_id, query="worst-case cost reserved")

    assert ranked.units[0].id == "t1.2"
    rebuilt = read_vectors(session_dir, model_id)
    assert set(rebuilt) == set(texts), "the vectors were made again and saved"
    assert len({len(v) for v in rebuilt.values()}) == 1
    assert len(next(iter(rebuilt.values()))) != 3


def test_a_query_embeds_a_bounded_number_of_units_and_the_next_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, session_id, session_dir = _store_of_three(tmp_path)
    model_id = make_embeddings(settings.kb).model_id
    monkeypatch.setattr(saved, "MAX_EMBEDDED_PER_QUERY", 2)
    query = "numbered citations of sources"  # the words of the third unit, not embedded yet
    first = saved.read_evidence(settings, session_id, query=query)
    assert len(read_vectors(session_dir, model_id)) == 2
    assert sorted(u.id for u in first.units) == ["t1.1", "t1.2", "t1.3"], "every unit ranked"
    second = saved.read_evidence(settings, session_id, query=query)
    assert len(read_vectors(session_dir, model_id)) == 3
    assert second.units[0].id == "t1.3"


async def test_ranked_reads_queue_on_their_own_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    settings, session_id, _ = _store_of_three(tmp_path)
    threads: list[str] = []
    read = saved.read_evidence

    def spy(*args: object, **kwargs: object) -> saved.EvidencePage:
        threads.append(threading.current_thread().name)
        return read(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(saved, "read_evidence", spy)
    await saved.read_evidence_soon(settings, session_id, query="cost")
    await saved.read_evidence_soon(settings, session_id)
    assert threads[0].startswith("evidence-query")
    assert not threads[1].startswith("evidence-query"), "a plain page does not queue"


# --- findings, from an oracle ------------------------------------------------------------

_words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=9)


@st.composite
def _oracle(draw: st.DrawFn) -> list[str]:
    """Findings: sentences of plain words, some with markers, some in the middle of none."""
    out = []
    for i in range(draw(st.integers(min_value=1, max_value=6))):
        body = " ".join(draw(st.lists(_words, min_size=4, max_size=10))).capitalize()
        markers = "".join(f"[S{n}]" for n in draw(st.sets(st.integers(1, 99), max_size=2)))
        out.append(f"{body} {markers}.".replace(" .", ".") if i % 2 else f"{body}. {markers}")
    return [" ".join(f.split()) for f in out]


_SHAPES = (
    "atx, bullets",
    "setext, paragraph",
    "numbered",
    "quoted",
    "table header and code around",
    "table rows",
)


def _render(shape: str, found: list[str], title: str) -> str:
    junk = f"{title} heading words here [S7]"  # had it been read as a finding, lists differ
    if shape == "atx, bullets":
        return f"## {junk}\n\n" + "\n".join(f"- {f}" for f in found)
    if shape == "setext, paragraph":
        return f"{junk}\n{'-' * len(junk)}\n\n" + " ".join(found)
    if shape == "numbered":
        return f"> ### {junk}\n\n" + "\n".join(f"{i}. {f}" for i, f in enumerate(found, 1))
    if shape == "quoted":
        return f"> ## {junk}\n>\n> " + "\n> ".join(found)
    if shape == "table rows":  # each finding a row: its text in one cell
        return f"| {junk} |\n|---|\n" + "\n".join(f"| {f} |" for f in found)
    table = f"| {junk} | x |\n|---|---|"
    return f"{table}\n\n" + "\n\n".join(found) + f"\n\n```\n{junk}.\n```\n\n<h2>{junk}</h2>\n"


@settings(max_examples=150)
@given(found=_oracle(), shape=st.sampled_from(_SHAPES), title=_words)
def test_findings_are_the_oracles_in_every_shape_a_model_writes(
    found: list[str], shape: str, title: str
) -> None:
    assert findings(_render(shape, found, title.capitalize())) == found, shape


@given(text=st.text(max_size=300))
def test_findings_never_raise_and_hold_only_the_texts_words(text: str) -> None:
    for finding in findings(text):
        assert all(word in text for word in finding.split()), finding


async def test_ranked_reads_queue_a_few_and_one_whose_client_left_never_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over HTTP: one read runs (held at a gate), three wait; a fifth is 503 with
    ``Retry-After``; a client that leaves frees its place, and its read never runs."""
    import asyncio
    import threading
    from concurrent.futures import Future, ThreadPoolExecutor

    import httpx

    from deep_research.frontends.http.app import create_app
    from tests.serving import free_port, serving

    settings, session_id, _ = _store_of_three(tmp_path)
    loop = asyncio.get_running_loop()
    changed = asyncio.Event()
    gate = threading.Event()
    started: list[str] = []
    queued: dict[str, Future[saved.EvidencePage]] = {}
    read = saved.read_evidence

    def gated(*args: object, **kwargs: object) -> saved.EvidencePage:
        started.append(str(kwargs["query"]))
        loop.call_soon_threadsafe(changed.set)
        gate.wait(60)
        return read(*args, **kwargs)  # type: ignore[arg-type]

    class Watched(ThreadPoolExecutor):
        def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]
            job = super().submit(fn, *args, **kwargs)
            queued[fn.keywords["query"]] = job
            job.add_done_callback(lambda _: loop.call_soon_threadsafe(changed.set))
            changed.set()
            return job

    async def until(condition: Callable[[], bool]) -> None:
        while not condition():
            await changed.wait()
            changed.clear()

    queries = Watched(max_workers=1)
    monkeypatch.setattr(saved, "read_evidence", gated)
    monkeypatch.setattr(saved, "_QUERIES", queries)
    port = free_port()
    url = f"/research/{session_id}/evidence"
    try:
        async with (
            asyncio.timeout(60),
            serving(create_app(settings, host="127.0.0.1", port=port), port) as base,
            httpx.AsyncClient(base_url=base, timeout=60) as client,
        ):
            first = asyncio.create_task(client.get(url, params={"query": "first"}))
            await until(lambda: started == ["first"])
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            host = f"Host: 127.0.0.1:{port}"
            writer.write(f"GET {url}?query=gone HTTP/1.1\r\n{host}\r\n\r\n".encode())
            await until(lambda: "gone" in queued)
            waiting = [asyncio.create_task(client.get(url, params={"query": q})) for q in "ab"]
            await until(lambda: len(queued) == saved.MAX_QUEUED_QUERIES)
            refused = await client.get(url, params={"query": "fifth"})
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "busy"
            assert int(refused.headers["retry-after"]) > 0
            writer.close()  # the client goes away while its read waits
            await until(lambda: queued["gone"].cancelled())
            later = asyncio.create_task(client.get(url, params={"query": "later"}))
            await until(lambda: "later" in queued)
            gate.set()
            replies = await asyncio.gather(first, *waiting, later)
    finally:
        gate.set()
        queries.shutdown()
    assert [reply.status_code for reply in replies] == [200] * 4
    assert sorted(started) == ["a", "b", "first", "later"], "the read nobody waits for never ran"
