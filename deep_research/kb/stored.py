"""A chunk as Chroma stores it, and read back as the same `Chunk`.

Its stored document is its ``indexed_text`` (title, heading path, text), which is what the
embedding model and BM25 both see; ``text_start`` in its metadata marks where the chunk's
own text begins.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from deep_research.kb.chunking import Chunk, document_key


def chroma_metadata(chunk: Chunk) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "root": chunk.root,
        "source": chunk.source,
        "doc": document_key(chunk.root, chunk.source),
        "heading": chunk.heading,
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
        "content_hash": chunk.content_hash,
        "title": chunk.title,
        "ordinal": chunk.ordinal,
        "text_start": len(chunk.indexed_text) - len(chunk.text),
    }
    if chunk.piece:
        meta["piece"] = True
        meta["column"] = chunk.column
    if chunk.tags:  # Chroma rejects empty lists
        meta["tags"] = list(chunk.tags)
    for key, value in chunk.meta:
        meta[f"fm_{key}"] = value
    return meta


def stored_chunk(chunk_id: str, document: str, meta: Mapping[str, Any]) -> Chunk:
    tags = meta.get("tags") or []
    return Chunk(
        id=chunk_id,
        root=str(meta["root"]),
        source=str(meta["source"]),
        heading=str(meta.get("heading", "")),
        start_line=int(meta["start_line"]),
        end_line=int(meta["end_line"]),
        text=document[int(meta["text_start"]) :],
        content_hash=str(meta.get("content_hash", "")),
        title=str(meta.get("title", "")),
        tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
        ordinal=int(meta.get("ordinal", 0)),
        meta=tuple((k[3:], value) for k, value in sorted(meta.items()) if k.startswith("fm_")),
        piece=bool(meta.get("piece", False)),
        column=int(meta.get("column", 0)),
    )


def rows(got: Mapping[str, Any]) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(id, document, metadata) of each chunk a collection ``get`` returned."""
    for cid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
        yield cid, doc or "", meta or {}
