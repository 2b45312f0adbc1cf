import numpy as np
import pytest

from specrag.retrieval.embedder import Embedder
from tests.support.env import make_settings

pytestmark = pytest.mark.slow

DOCS = ["Employees get 25 days of paid annual leave per calendar year.",
        "Expense claims must be filed within 30 days with itemised receipts.",
        "All laptops must use full-disk encryption and a screen lock after 5 minutes.",
        "The on-call engineer acknowledges a page within 15 minutes."]
QUERIES = ["how many vacation days do I get", "deadline for submitting receipts",
           "disk encryption requirement", "how fast must on-call respond to a page"]


def test_int8_retrieves_the_right_document(embedder):
    d = embedder.encode_documents(DOCS)
    q = embedder.encode_queries(QUERIES)
    assert d.shape == (4, 384) and d.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-5)
    assert list((q @ d.T).argmax(1)) == [0, 1, 2, 3]


def test_int8_stays_close_to_fp32_and_order_is_preserved(tmp_path, embedder):
    fp32 = Embedder(make_settings(tmp_path), backend="onnx-fp32").warm_up()
    a = embedder.encode_documents(DOCS)
    b = fp32.encode_documents(DOCS)
    cos = (a * b).sum(1)
    assert cos.min() > 0.97
    # batching and length sorting must not shuffle rows
    mixed = [DOCS[2], "x", DOCS[0] * 5, DOCS[1]]
    single = np.vstack([embedder.encode_documents([t]) for t in mixed])
    batched = embedder.encode_documents(mixed)
    # int8 activations are quantized per batch, so rows differ slightly, never swap
    sims = batched @ single.T
    assert list(sims.argmax(1)) == [0, 1, 2, 3]
    assert np.diag(sims).min() > 0.97


def test_fp32_onnx_matches_sentence_transformers(tmp_path):
    s = make_settings(tmp_path)
    onnx = Embedder(s, backend="onnx-fp32").encode_documents(DOCS)
    torch_ = Embedder(s, backend="torch").encode_documents(DOCS)
    assert (onnx * torch_).sum(1).min() > 0.999


def test_query_and_document_prefixes_are_applied(tmp_path, embedder):
    s = make_settings(tmp_path, **{"embedder.query_prefix": "query: "})
    e = Embedder(s)
    e.tokenizer, e._session, e._input_names = embedder.tokenizer, embedder._session, embedder._input_names
    e.dimension = embedder.dimension
    with_prefix = e.encode_queries(["leave policy"])
    plain = embedder.encode_queries(["leave policy"])
    assert not np.allclose(with_prefix, plain)
    np.testing.assert_allclose(with_prefix, embedder.encode_documents(["query: leave policy"]), atol=1e-6)


def test_empty_input_and_bad_backend():
    with pytest.raises(ValueError, match="embedder.backend"):
        Embedder(make_settings("/tmp"), backend="tf")


def test_empty_batch(embedder):
    assert embedder.encode_documents([]).shape == (0, 384)
