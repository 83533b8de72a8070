"""The store: named KBs, reopening, the embedding-model guard, removal."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deep_research.app.config import Settings
from deep_research.core.errors import KBMissing, KnowledgeBaseError, UsageError
from deep_research.kb.catalog import list_kbs, open_kb, remove_kb
from deep_research.kb.chunking import chunk_markdown
from deep_research.kb.ingest import ingest
from deep_research.kb.lexical import LexicalDoc, LexicalIndex
from deep_research.kb.search import search
from deep_research.kb.store import LEXICAL_FILE
from deep_research.kb.stored import chroma_metadata, stored_chunk
from tests.hash_embeddings import HashEmbeddings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", chroma_host=None)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "a.md").write_text(
        "---\ntags: [fruit]\n---\n# Alpha\n\nApples and pears.\n", encoding="utf-8"
    )
    (root / "b.md").write_text("# Beta\n\nBananas.\n", encoding="utf-8")
    return root


def test_missing_kb_is_its_own_error_unless_created(settings: Settings) -> None:
    with pytest.raises(KBMissing, match="not found"):
        open_kb(settings.kb, "nope", embeddings=HashEmbeddings())
    assert issubclass(KBMissing, KnowledgeBaseError)
    assert KBMissing.exit_code == 7
    assert list_kbs(settings.kb) == []
    open_kb(settings.kb, "nope", embeddings=HashEmbeddings(), create=True)
    assert list_kbs(settings.kb) == ["nope"]
    with pytest.raises(KBMissing):
        remove_kb(settings.kb, "other")


def not_missing(error: pytest.ExceptionInfo[KnowledgeBaseError]) -> bool:
    return not isinstance(error.value, KBMissing)


def test_an_unreadable_store_is_a_kb_error_with_its_cause_not_a_missing_kb(
    settings: Settings,
) -> None:
    chroma = settings.kb_dir / "broken" / "chroma"
    chroma.mkdir(parents=True)
    (chroma / "chroma.sqlite3").write_bytes(b"not a database " * 100)
    with pytest.raises(KnowledgeBaseError, match="file is not a database") as error:
        open_kb(settings.kb, "broken", embeddings=HashEmbeddings())
    assert not_missing(error)


def test_an_unreachable_chroma_server_is_a_kb_error_not_a_missing_kb(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, chroma_host="127.0.0.1", chroma_port=_free_port())
    with pytest.raises(KnowledgeBaseError, match="cannot reach Chroma") as error:
        open_kb(settings.kb, "shared", embeddings=HashEmbeddings())
    assert not_missing(error)


def test_reopen_sees_the_same_chunks_and_stats(settings: Settings, docs: Path) -> None:
    store = open_kb(settings.kb, "main", embeddings=HashEmbeddings(), create=True)
    ingest(store, docs)
    reopened = open_kb(settings.kb, "main", embeddings=HashEmbeddings())
    stats = reopened.stats()
    assert (stats.files, stats.chunks, stats.embedding_model) == (2, 2, "hash:256")
    assert stats.size_bytes > 0
    assert [h.source for h in search(reopened, "bananas", k=1)] == ["b.md"]


def test_a_different_embedding_model_is_refused_with_a_hint(settings: Settings, docs: Path) -> None:
    ingest(open_kb(settings.kb, "main", embeddings=HashEmbeddings(), create=True), docs)
    with pytest.raises(KnowledgeBaseError, match=r"hash:256.*hash:64.*kb rm main") as error:
        open_kb(settings.kb, "main", embeddings=HashEmbeddings(64))
    assert not_missing(error)
    with pytest.raises(KnowledgeBaseError):
        open_kb(settings.kb, "main", embeddings=HashEmbeddings(64), create=True)


def test_named_kbs_are_separate_and_removable(settings: Settings, docs: Path) -> None:
    first = open_kb(settings.kb, "one", embeddings=HashEmbeddings(), create=True)
    ingest(first, docs)
    open_kb(settings.kb, "two", embeddings=HashEmbeddings(), create=True)
    assert list_kbs(settings.kb) == ["one", "two"]
    assert open_kb(settings.kb, "two", embeddings=HashEmbeddings()).count() == 0

    remove_kb(settings.kb, "one")
    assert list_kbs(settings.kb) == ["two"]
    with pytest.raises(KnowledgeBaseError):
        remove_kb(settings.kb, "one")
    # Re-creating a removed KB in the same process works (chromadb caches clients by path).
    again = open_kb(settings.kb, "one", embeddings=HashEmbeddings(), create=True)
    assert ingest(again, docs).added == ["a.md", "b.md"]
    assert again.count() == 2


def test_kb_names_are_validated(settings: Settings) -> None:
    with pytest.raises(UsageError):
        open_kb(settings.kb, "../escape", embeddings=HashEmbeddings(), create=True)


def test_lexical_index_is_persisted_and_follows_the_generation(
    settings: Settings, docs: Path
) -> None:
    store = open_kb(settings.kb, "main", embeddings=HashEmbeddings(), create=True)
    ingest(store, docs)
    assert (settings.kb_dir / "main" / LEXICAL_FILE).is_file()
    generation = store.generation
    fresh = open_kb(settings.kb, "main", embeddings=HashEmbeddings())
    assert fresh.lexical().generation == generation
    assert len(fresh.lexical().ids) == 2

    (docs / "c.md").write_text("# Gamma\n\nGrapes.\n", encoding="utf-8")
    ingest(store, docs)
    # Another open store notices the new generation and picks up the new chunk.
    assert len(fresh.lexical().ids) == 3
    assert [h.source for h in search(fresh, "grapes", k=1, mode="bm25")] == ["c.md"]
    # A damaged index file is rebuilt, never an error.
    (settings.kb_dir / "main" / LEXICAL_FILE).write_bytes(b"PK\x03\x04 torn")
    again = open_kb(settings.kb, "main", embeddings=HashEmbeddings())
    assert [h.source for h in search(again, "grapes", k=1, mode="bm25")] == ["c.md"]


SWAPPER = """
import sys
from pathlib import Path
from deep_research.kb.lexical import LexicalDoc, LexicalIndex

def index(n):
    docs = [LexicalDoc(f"c{i}", "r", f"s{i}.md", (), f"word{i} shared") for i in range(n)]
    return LexicalIndex.build("g", docs)

small, large = index(40), index(400)
for i in range(int(sys.argv[2])):
    (small if i % 2 else large).save(Path(sys.argv[1]))
"""


def test_a_reader_never_sees_half_of_an_index_being_swapped_by_another_process(
    tmp_path: Path,
) -> None:
    path = tmp_path / LEXICAL_FILE
    docs = [LexicalDoc(f"c{i}", "r", f"s{i}.md", (), f"word{i} shared") for i in range(40)]
    LexicalIndex.build("g", docs).save(path)
    writer = subprocess.Popen([sys.executable, "-c", SWAPPER, str(path), "400"])
    loads: list[tuple[int, int, int]] = []
    missing = 0
    while writer.poll() is None:
        index = LexicalIndex.load(path, "g")
        if index is None or index.retriever is None:
            missing += 1
            continue
        hits = index.search("shared", 1000)
        loads.append((len(index.ids), int(index.retriever.scores["num_docs"]), len(hits)))
    assert writer.returncode == 0
    assert len(loads) > 20, "the writer finished before the reader could race it"
    assert missing == 0  # the file is always there, whole
    assert {size for size, _, _ in loads} <= {40, 400}
    assert all(size == num_docs == hits for size, num_docs, hits in loads)
    assert not list(tmp_path.glob(".*tmp")), "no temporary file is left behind"


HOLDER = """
import sys
from pathlib import Path
from deep_research.app.config import Settings
from tests.hash_embeddings import HashEmbeddings
from deep_research.kb.catalog import open_kb

store = open_kb(Settings(home=Path(sys.argv[1]), chroma_host=None), "main",
                embeddings=HashEmbeddings())
with store.write_lock():
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_kb_rm_is_refused_while_another_process_holds_the_write_lock(
    settings: Settings, docs: Path
) -> None:
    ingest(open_kb(settings.kb, "main", embeddings=HashEmbeddings(), create=True), docs)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(settings.home)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdin is not None
    assert holder.stdout is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(KnowledgeBaseError, match="being written by another process"):
            remove_kb(settings.kb, "main")
        assert list_kbs(settings.kb) == ["main"]
        assert open_kb(settings.kb, "main", embeddings=HashEmbeddings()).count() == 2
    finally:
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=30)
    remove_kb(settings.kb, "main")
    assert list_kbs(settings.kb) == []


# --- a shared Chroma server (chromadb.HttpClient) ----------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[int]:
    """`chroma run` on loopback (the server ships with chromadb); skipped if unavailable."""
    exe = shutil.which("chroma") or str(Path(sys.executable).with_name("chroma"))
    if not Path(exe).exists():
        pytest.skip("the chroma server binary is not installed")
    port = _free_port()
    process = subprocess.Popen(
        [exe, "run", "--path", str(tmp_path / "srv"), "--host", "127.0.0.1", "--port", f"{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("the chroma server did not start")
                time.sleep(0.05)  # polling a port: there is no event to wait on
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_chroma_server_is_used_when_a_host_is_set(
    tmp_path: Path, docs: Path, chroma_server: int
) -> None:
    settings = Settings(home=tmp_path / "h", chroma_host="127.0.0.1", chroma_port=chroma_server)
    store = open_kb(settings.kb, "shared", embeddings=HashEmbeddings(), create=True)
    assert ingest(store, docs).added == ["a.md", "b.md"]
    assert store.location == f"http://127.0.0.1:{chroma_server}"
    assert not (settings.kb_dir / "shared" / "chroma").exists()
    hit = search(store, "bananas", k=1)[0]
    assert hit.source == "b.md"
    filtered = search(store, "bananas", k=2, mode="dense", path_glob="docs/a.md")
    assert [h.source for h in filtered] == ["a.md"]  # the filter reaches the server
    assert list_kbs(settings.kb) == ["shared"]
    with pytest.raises(KnowledgeBaseError, match="re-ingest"):
        open_kb(settings.kb, "shared", embeddings=HashEmbeddings(64))
    remove_kb(settings.kb, "shared")
    assert list_kbs(settings.kb) == []


def test_a_chunk_reads_back_from_its_stored_form_unchanged() -> None:
    text = "---\ntitle: T\ntags: [a, b]\nauthor: Me\n---\n# H\n\nSome body text.\n"
    for chunk in chunk_markdown(text, "f.md", max_tokens=100, overlap_tokens=0, root="r"):
        assert stored_chunk(chunk.id, chunk.indexed_text, chroma_metadata(chunk)) == chunk
