"""tools/embeddings.py: the numpy all-MiniLM-L6-v2 gives sentence-transformers' vectors."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from tools.embeddings import Embedder, ModelUnavailable, model_directory, read_safetensors

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder.load()


def test_vectors_match_sentence_transformers(embedder: Embedder) -> None:
    # Made once with sentence-transformers 6.2 + PyTorch 2.15 on the same model files; the
    # texts include accents, CJK, an emoji and one longer than the 256-token limit.
    reference = json.loads(REFERENCE.read_text())
    expected = np.array(reference["vectors"], dtype=np.float32)
    vectors = embedder.embed(reference["texts"])
    assert vectors.shape == (len(reference["texts"]), 384)
    assert np.abs(vectors - expected).max() < 1e-5
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_batching_and_order_do_not_change_a_vector(embedder: Embedder) -> None:
    texts = [f"line {index} " * (index % 7 + 1) for index in range(40)]
    together = embedder.embed(texts)
    alone = np.stack([embedder.embed([text])[0] for text in texts[:5]])
    assert np.abs(together[:5] - alone).max() < 1e-5


def test_similar_meanings_are_closer_than_unrelated_ones(embedder: Embedder) -> None:
    query, related, unrelated = embedder.embed(
        [
            "check the user's password",
            "def verify_credentials(user, secret): return hash(secret) == user.pw",
            "resize the image to a thumbnail",
        ]
    )
    assert float(query @ related) > float(query @ unrelated) + 0.1


def test_safetensors_are_read_as_float32_arrays(tmp_path: Path) -> None:
    data = np.arange(6, dtype="<f4").tobytes()
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}})
    path = tmp_path / "t.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + data)
    tensors = read_safetensors(path)
    assert tensors["w"].dtype == np.float32
    assert tensors["w"].tolist() == [[0, 1, 2], [3, 4, 5]]


def test_a_missing_model_directory_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXEC_DAEMON_EMBEDDING_MODEL", str(tmp_path))
    with pytest.raises(ModelUnavailable, match="weights are missing"):
        model_directory()
