"""What the knowledge base reads of the settings: a small object the composition root
builds (``app.config.Settings.kb``), so ``kb/`` imports nothing above it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import SecretStr

EmbeddingProvider = Literal["local", "local-fast", "openai"]


@dataclass(frozen=True)
class OpenAIClientSettings:
    """What an OpenAI client is made with: filled by the composition root from its one
    policy per purpose (``app.clients.client_settings``), never chosen here."""

    api_key: SecretStr
    """The key sent (a placeholder for a local server without one)."""
    base_url: str | None
    max_retries: int
    timeout: float
    """Seconds for one request."""


@dataclass(frozen=True)
class KBSettings:
    kb_dir: Path
    """Where every local KB lives (one folder each)."""
    kb_name: str
    """The KB used when none is named."""
    chroma_host: str | None
    """A Chroma server holding the vectors; None: on disk under ``kb_dir``."""
    chroma_port: int
    chunk_tokens: int
    chunk_overlap_tokens: int
    max_file_bytes: int
    """Larger files are skipped, with the reason."""
    embedding_provider: EmbeddingProvider
    openai_embedding_model: str
    embeddings_client: OpenAIClientSettings | None
    """The ``openai`` embeddings' client; None: no server is configured (no key, no URL)."""

    def __repr__(self) -> str:  # the key never reaches a log
        return f"KBSettings(kb_dir={str(self.kb_dir)!r}, kb_name={self.kb_name!r})"
