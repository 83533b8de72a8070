"""Feature-hashing embeddings, for fast tests: no model, no semantics beyond shared words."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import numpy.typing as npt

from deep_research.kb.embeddings import NamedEmbeddings, normalize_rows

_WORD = re.compile(r"\w+")


class HashEmbeddings(NamedEmbeddings):
    """Signed feature hashing of lowercase words; deterministic across processes."""

    def __init__(self, dimensions: int = 256) -> None:
        self.dimensions = dimensions

    @property
    def model_id(self) -> str:
        return f"hash:{self.dimensions}"

    def _one(self, text: str) -> npt.NDArray[np.float32]:
        vector = np.zeros(self.dimensions, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            # blake2b, not hash(): Python salts str hashes per process.
            digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            vector[digest % self.dimensions] += 1.0 if (digest >> 63) & 1 else -1.0
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        matrix = normalize_rows(np.stack([self._one(t) for t in texts]))
        result: list[list[float]] = matrix.tolist()
        return result

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]
