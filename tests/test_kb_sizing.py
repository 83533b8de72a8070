"""Chunks fit the embedding model: sizes are counted with the model's own tokenizer.

Every measure here is taken with a fresh `tokenizers.Tokenizer` read from the shipped
artifact, with special tokens and no truncation: what the model would really be fed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from deep_research.app.config import Settings
from deep_research.kb.catalog import open_kb
from deep_research.kb.chunking import Chunk, chunk_markdown
from deep_research.kb.embeddings import ASSETS_DIR
from deep_research.kb.ingest import chunk_sizing, ingest
from deep_research.kb.onnx_embeddings import DEFAULT_ONNX_MODEL, OnnxEmbeddings
from deep_research.kb.static_embeddings import DEFAULT_STATIC_MODEL, StaticEmbeddings
from tests.hash_embeddings import HashEmbeddings

SHIPPED_KB = Path(__file__).resolve().parents[1] / "kb"
CJK = (
    """# 知识库

东京是日本的首都，人口约一千四百万。京都以寺庙和庭园闻名，每年吸引大量游客。大阪是关西地区的经济中心，\
以美食和商业文化著称。北海道冬季漫长，札幌的雪祭是重要的旅游活动。冲绳位于南方，拥有珊瑚礁和亚热带气候。\
日本的铁路网络非常发达，新干线连接主要城市，准点率极高。"""
    + "\n\n## 检索\n\n"
    + ("混合检索结合了词汇匹配与语义向量，能够同时找到关键词命中和同义表达的段落。" * 30)
)


def measure(model: str) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(ASSETS_DIR / model / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def window(model: str) -> int:
    config = json.loads((ASSETS_DIR / model / "config.json").read_text(encoding="utf-8"))
    return int(config["max_length"])


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbeddings:
    return OnnxEmbeddings()


def chunk_like_ingest(text: str, source: str, embeddings: OnnxEmbeddings) -> list[Chunk]:
    sizing = chunk_sizing(Settings().kb, embeddings)
    return chunk_markdown(
        text,
        source,
        max_tokens=sizing.max_tokens,
        overlap_tokens=sizing.overlap_tokens,
        count_tokens=embeddings.count_tokens,
        root="kb",
    )


def test_the_default_model_reads_254_tokens_and_the_cap_follows_it(onnx: OnnxEmbeddings) -> None:
    assert onnx.max_input_tokens == window(DEFAULT_ONNX_MODEL) - 2 == 254  # [CLS] … [SEP]
    assert chunk_sizing(Settings(chunk_tokens=400).kb, onnx).max_tokens == 254
    assert chunk_sizing(Settings(chunk_tokens=120).kb, onnx).max_tokens == 120
    assert chunk_sizing(Settings(chunk_tokens=400).kb, HashEmbeddings()).max_tokens == 400


def test_no_chunk_of_the_shipped_kb_exceeds_the_model_window(onnx: OnnxEmbeddings) -> None:
    tokenizer = measure(DEFAULT_ONNX_MODEL)
    files = sorted(SHIPPED_KB.rglob("*.md"))
    assert len(files) >= 10
    over: list[str] = []
    sizes: list[int] = []
    for path in files:
        for chunk in chunk_like_ingest(path.read_text(encoding="utf-8"), path.name, onnx):
            size = len(tokenizer.encode(chunk.indexed_text).ids)
            sizes.append(size)
            if size > window(DEFAULT_ONNX_MODEL):
                over.append(f"{chunk.locator}: {size} tokens")
    assert over == []
    # Chunks are not made needlessly small either: most use over half the window.
    assert sum(size > window(DEFAULT_ONNX_MODEL) // 2 for size in sizes) > len(sizes) / 2


def test_cjk_text_is_sized_by_its_real_token_count(onnx: OnnxEmbeddings) -> None:
    tokenizer = measure(DEFAULT_ONNX_MODEL)
    chunks = chunk_like_ingest(CJK, "cjk.md", onnx)
    sizes = [len(tokenizer.encode(chunk.indexed_text).ids) for chunk in chunks]
    assert max(sizes) <= window(DEFAULT_ONNX_MODEL)
    assert max(sizes) > 200  # the window is used, not a quarter of it
    # Every character is kept: the pieces of the long line cover it.
    long_line = CJK.split("\n")[-1]
    pieces = [c.text for c in chunks if c.piece]
    assert pieces
    assert "".join(pieces).count("。") >= long_line.count("。")


def test_ingest_sizes_chunks_for_the_model_it_embeds_with(tmp_path: Path) -> None:
    """The fast static model reads 512 tokens: through a real ingest, nothing stored is longer."""
    root = tmp_path / "notes"
    root.mkdir()
    for path in sorted(SHIPPED_KB.rglob("*.md"))[:4]:
        (root / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    (root / "cjk.md").write_text(CJK, encoding="utf-8")
    settings = Settings(home=tmp_path / "home", chroma_host=None, chunk_tokens=8000)
    store = open_kb(settings.kb, "s", embeddings=StaticEmbeddings(), create=True)
    report = ingest(store, root)
    assert report.skipped == []
    tokenizer = measure(DEFAULT_STATIC_MODEL)
    got = store.collection.get(include=["documents"])
    sizes = [len(tokenizer.encode(doc, add_special_tokens=False).ids) for doc in got["documents"]]
    assert len(sizes) == report.total_chunks
    assert max(sizes) <= window(DEFAULT_STATIC_MODEL) == 512
    assert max(sizes) > 400  # chunk_tokens=8000 was capped at the window, not at 400
