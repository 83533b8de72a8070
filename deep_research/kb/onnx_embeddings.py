"""The default local embedder ("local"): all-MiniLM-L6-v2 as int8 ONNX.

The model ships in ``kb/assets/`` and is run by onnxruntime + tokenizers: no torch, no
network. One onnxruntime session per artifact and process, built on the first text; by
default texts are embedded one per run, several runs at a time on their own threads.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
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
    counting_tokenizer,
    max_length,
    normalize_rows,
)

if TYPE_CHECKING:
    from onnxruntime import InferenceSession  # type: ignore[import-untyped]
    from tokenizers import Tokenizer

DEFAULT_ONNX_MODEL = "minilm-l6-int8"

_ONNX_LOCK = threading.Lock()


@cache
def _file_digest(path: Path) -> str:
    if not path.is_file():
        raise KnowledgeBaseError(
            f"embedding model not found at {path}; "
            "reinstall the package or set DEEP_RESEARCH_EMBEDDING_PROVIDER=openai"
        )
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class _OnnxModel:
    session: InferenceSession
    tokenizer: Tokenizer
    max_chars: int


@cache
def _load_onnx(model_dir: Path) -> _OnnxModel:
    """One onnxruntime session per artifact and process, run by one thread per call."""
    import onnxruntime as ort
    from tokenizers import Tokenizer

    _file_digest(model_dir / "model.onnx")  # a clear error if the file is missing
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    max_tokens = int(config.get("max_length", 256))
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_tokens)
    tokenizer.no_padding()  # padded per batch, to the batch's longest text
    options = ort.SessionOptions()
    # Parallel across texts, not within one: a run split over every core waits at each of
    # its ~100 operators for the slowest thread, and its threads spin while they wait. On
    # a shared 2-core machine that made a run 0.2 s instead of 20 ms (a thread descheduled
    # at each barrier); independent runs on their own threads have no barrier to wait at.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(
        str(model_dir / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    # Tokenizing a megabyte only to keep 256 tokens is slow; no token is under one char,
    # so a generous cut changes nothing but text with very long runs of whitespace.
    return _OnnxModel(session=session, tokenizer=tokenizer, max_chars=max_tokens * 32)


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class OnnxEmbeddings(ShippedEmbeddings):
    """Transformer embeddings: attention-masked mean of the last hidden state, L2-normalized.

    Texts are embedded one per run by default, ``workers`` runs at a time (one thread each,
    longest texts first so no worker is left with a long one at the end): a vector is then
    the same whatever else is embedded with it, in whichever thread.
    """

    def __init__(
        self, model_dir: Path | None = None, *, batch_size: int = 1, workers: int | None = None
    ) -> None:
        # int8 activations are scaled per batch, so batch-mates shift a vector slightly;
        # one text per run makes vectors independent of batching and was measured
        # fastest on 2 cores (8 per batch: 20% slower). Larger batches still go
        # length-sorted, which pays off for float models.
        self.model_dir = (model_dir or ASSETS_DIR / DEFAULT_ONNX_MODEL).resolve()
        self.batch_size = batch_size
        self.workers = workers or usable_cores()

    @property
    def _model(self) -> _OnnxModel:
        with _ONNX_LOCK:  # concurrent first calls must not build two sessions
            return _load_onnx(self.model_dir)

    @property
    def model_id(self) -> str:
        # Hashing the file is enough to name the model; the session waits for the first text.
        return f"local:{self.model_dir.name}@{_file_digest(self.model_dir / 'model.onnx')[:8]}"

    @property
    def dimensions(self) -> int:
        return int(self._model.session.get_outputs()[0].shape[-1])

    @property
    def max_input_tokens(self) -> int | None:
        window = max_length(self.model_dir, 256)
        assert window is not None
        tokenizer = counting_tokenizer(self.model_dir / "tokenizer.json")
        return window - tokenizer.num_special_tokens_to_add(False)  # [CLS] and [SEP]

    def encode(self, texts: Sequence[str]) -> FloatMatrix:
        model = self._model
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        encodings = model.tokenizer.encode_batch_fast([t[: model.max_chars] for t in texts])
        ids = [encoding.ids for encoding in encodings]
        # Similar lengths share a batch, so little compute goes to padding.
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]), reverse=True)
        batches = [order[s : s + self.batch_size] for s in range(0, len(order), self.batch_size)]
        if self.workers == 1 or len(batches) <= 1:
            for rows in batches:
                out[rows] = _run(model.session, [ids[i] for i in rows])
            return normalize_rows(out)
        with ThreadPoolExecutor(self.workers, thread_name_prefix="embed") as pool:
            running: dict[Future[FloatMatrix], list[int]] = {
                pool.submit(_run, model.session, [ids[i] for i in rows]): rows for rows in batches
            }
            try:
                for future in as_completed(running):
                    rows = running[future]
                    out[rows] = future.result()
            finally:  # an error or Ctrl-C: drop the runs not started yet
                for future in running:
                    future.cancel()
        return normalize_rows(out)


def _run(session: InferenceSession, rows: list[list[int]]) -> FloatMatrix:
    """The mean-pooled (not yet normalized) vectors of token-id rows, padded to the longest;
    onnxruntime lets go of the GIL while it runs, so threads run in parallel."""
    width = max(len(row) for row in rows)
    ids = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=np.int64)
    for j, row in enumerate(rows):
        ids[j, : len(row)] = row
        mask[j, : len(row)] = 1
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids}
    hidden = np.asarray(session.run(None, inputs)[0], dtype=np.float32)
    weights = mask.astype(np.float32)
    summed = np.einsum("bld,bl->bd", hidden, weights)
    pooled: FloatMatrix = summed / np.maximum(weights.sum(axis=1, keepdims=True), 1.0)
    return pooled
