"""The fast local embedder ("local-fast"): a model2vec-style static model.

Distilled from all-MiniLM-L6-v2 and shipped in ``kb/assets/``: each token has one vector,
looked up and mean-pooled, so thousands of chunks a second on a CPU (~50x the ONNX model),
at a lower quality. No torch, no network.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from deep_research.core.errors import KnowledgeBaseError
from deep_research.kb.embeddings import (
    ASSETS_DIR,
    FloatMatrix,
    ShippedEmbeddings,
    max_length,
    normalize_rows,
)

if TYPE_CHECKING:
    from tokenizers import Tokenizer

DEFAULT_STATIC_MODEL = "minilm-l6-static-256"


@dataclass(frozen=True)
class _StaticModel:
    tokenizer: Tokenizer
    vectors: FloatMatrix
    max_chars: int | None
    normalize: bool
    unk_id: int | None
    digest: str


@cache
def _load_static(model_dir: Path) -> _StaticModel:
    """Read one artifact once per process (the tokenizer and ~10 MB of vectors)."""
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        raise KnowledgeBaseError(
            f"embedding model not found at {model_dir} (expected model.safetensors); "
            "reinstall the package or set DEEP_RESEARCH_EMBEDDING_PROVIDER=openai"
        )
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_padding()
    max_tokens: int | None = config.get("max_length", 512)
    if max_tokens is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(max_tokens)
    tensors = load_file(str(weights))
    vectors = tensors["embeddings"].astype(np.float32)
    vocab = tokenizer.get_vocab()
    # model2vec cuts text to max_tokens * the median token length before tokenizing:
    # long documents tokenize in bounded time and vectors match model2vec's exactly.
    median_len = int(np.median([len(token) for token in vocab])) if vocab else 1
    unk = config.get("unk_token") or "[UNK]"
    return _StaticModel(
        tokenizer=tokenizer,
        vectors=vectors,
        max_chars=None if max_tokens is None else max_tokens * median_len,
        normalize=bool(config.get("normalize", True)),
        unk_id=vocab.get(unk),
        digest=hashlib.sha256(weights.read_bytes()).hexdigest(),
    )


class StaticEmbeddings(ShippedEmbeddings):
    """Mean of static token vectors, L2-normalized; thousands of chunks per second on a CPU."""

    def __init__(self, model_dir: Path | None = None, *, batch_size: int = 256) -> None:
        self.model_dir = (model_dir or ASSETS_DIR / DEFAULT_STATIC_MODEL).resolve()
        self.batch_size = batch_size
        self.progress_step = batch_size

    @property
    def _model(self) -> _StaticModel:
        return _load_static(self.model_dir)

    @property
    def model_id(self) -> str:
        return f"local:{self.model_dir.name}@{self._model.digest[:8]}"

    @property
    def dimensions(self) -> int:
        return int(self._model.vectors.shape[1])

    @property
    def max_input_tokens(self) -> int | None:
        return max_length(self.model_dir, 512)  # no special tokens: see encode

    def encode(self, texts: Sequence[str]) -> FloatMatrix:
        model = self._model
        out = np.zeros((len(texts), model.vectors.shape[1]), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = [t[: model.max_chars] for t in texts[start : start + self.batch_size]]
            encodings = model.tokenizer.encode_batch_fast(batch, add_special_tokens=False)
            for offset, encoding in enumerate(encodings):
                ids = encoding.ids
                if model.unk_id is not None:
                    ids = [i for i in ids if i != model.unk_id]
                if ids:
                    out[start + offset] = model.vectors[ids].mean(axis=0)
        return normalize_rows(out) if model.normalize else out
