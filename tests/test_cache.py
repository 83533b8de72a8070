from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import diskcache
from pydantic import BaseModel

from deep_research.persistence.cache import (
    ResultCache,
    canonical_json,
    content_hash,
    normalize_query,
)


def test_canonical_json_is_order_and_space_independent() -> None:
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert canonical_json({"a": [1, 2], "b": 1}) == canonical_json({"b": 1, "a": [1, 2]})
    assert canonical_json({"q": "Größe €"}) == '{"q":"Größe €"}'


def test_canonical_json_accepts_pydantic_models() -> None:
    class Schema(BaseModel):
        name: str
        size: int

    assert canonical_json(Schema(name="x", size=1)) == '{"name":"x","size":1}'


def test_content_hash_is_sha256_of_the_parts() -> None:
    expected = hashlib.sha256(b'["web","gpt-4.1","q"]').hexdigest()
    assert content_hash("web", "gpt-4.1", "q") == expected


def test_content_hash_parts_cannot_run_together() -> None:
    assert content_hash("ab", "c") != content_hash("a", "bc")
    assert content_hash("a", "b") != content_hash("b", "a")


def test_normalize_query() -> None:
    assert normalize_query("  What IS\tChroma?\n\n ") == "what is chroma?"
    assert normalize_query("Straße\u00a0\u2003Größe") == "strasse grösse"
    assert normalize_query("") == ""


async def test_miss_then_hit(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache")
    try:
        assert await cache.get("web", "gpt-4.1", "chroma vs qdrant") is None
        value = json.dumps({"notes": "…", "citations": []})
        await cache.set("web", "gpt-4.1", "chroma vs qdrant", value)
        assert await cache.get("web", "gpt-4.1", "chroma vs qdrant") == value
        assert cache.errors == 0
    finally:
        cache.close()


async def test_normalized_queries_share_an_entry(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache")
    try:
        await cache.set("web", "gpt-4.1", "Chroma  vs\nQdrant", '"v"')
        assert await cache.get("web", "gpt-4.1", "  chroma vs qdrant ") == '"v"'
    finally:
        cache.close()


async def test_tool_and_model_are_part_of_the_key(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache")
    try:
        await cache.set("web", "gpt-4.1", "q", '"web"')
        assert await cache.get("kb", "gpt-4.1", "q") is None
        assert await cache.get("web", "gpt-4.1-mini", "q") is None
    finally:
        cache.close()


async def test_values_persist_across_instances(tmp_path: Path) -> None:
    first = ResultCache(tmp_path / "cache")
    await first.set("web", "m", "q", '{"a":1}')
    first.close()
    second = ResultCache(tmp_path / "cache")
    try:
        assert await second.get("web", "m", "q") == '{"a":1}'
    finally:
        second.close()


async def test_values_are_stored_as_text_not_pickles(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache")
    await cache.set("web", "m", "q", '{"a":1}')
    cache.close()
    raw = diskcache.Cache(str(tmp_path / "cache"))
    try:
        key = ResultCache.key("web", "m", "q")
        # mode 1 is diskcache's MODE_RAW (str/bytes stored as is); 4 would be a pickle.
        row = raw._sql("SELECT mode, value FROM Cache WHERE key = ?", (key,)).fetchone()
        assert row == (1, '{"a":1}')
    finally:
        raw.close()


async def test_non_string_value_found_in_the_store_is_a_miss(tmp_path: Path) -> None:
    raw = diskcache.Cache(str(tmp_path / "cache"))
    raw.set(ResultCache.key("web", "m", "q"), {"pickled": True})
    raw.close()
    cache = ResultCache(tmp_path / "cache")
    try:
        assert await cache.get("web", "m", "q") is None
    finally:
        cache.close()


async def test_corrupt_cache_file_behaves_as_a_miss(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    directory.mkdir()
    (directory / "cache.db").write_bytes(b"this is not a sqlite database" * 10)
    cache = ResultCache(directory)
    try:
        assert await cache.get("web", "m", "q") is None
        await cache.set("web", "m", "q", '"v"')  # no-op, no crash
        assert await cache.get("web", "m", "q") is None
        assert cache.errors >= 1
    finally:
        cache.close()
    # The corrupt file is left alone for the user to inspect or delete.
    assert (directory / "cache.db").read_bytes().startswith(b"this is not")


async def test_cache_dir_that_is_a_file_behaves_as_a_miss(tmp_path: Path) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("not a directory")
    cache = ResultCache(blocker)
    try:
        await cache.set("web", "m", "q", '"v"')
        assert await cache.get("web", "m", "q") is None
        assert cache.errors == 1  # opening failed once; later calls don't retry
    finally:
        cache.close()


async def test_store_busy_elsewhere_degrades_to_a_miss_and_recovers(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    cache = ResultCache(directory, timeout=0.05)
    try:
        await cache.set("web", "m", "q", '"v"')
        # Another writer holds sqlite's write lock (as a second process would).
        other = sqlite3.connect(directory / "cache.db", isolation_level=None)
        try:
            other.execute("BEGIN EXCLUSIVE")
            await cache.set("web", "m", "other", '"w"')  # must not raise
            assert cache.errors == 1
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert await cache.get("web", "m", "other") is None  # the failed set stored nothing
        await cache.set("web", "m", "other", '"w"')  # a transient error doesn't disable the cache
        assert await cache.get("web", "m", "other") == '"w"'
        assert cache.errors == 1
    finally:
        cache.close()
