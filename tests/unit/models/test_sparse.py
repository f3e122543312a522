"""The lexical tokenizer (English and CJK), script detection and the BM25 sparse encoder."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pagesight.core.protocols import SparseEncoder
from pagesight.core.settings import SparseOptions
from pagesight.core.types import SparseVector
from pagesight.models.sparse import Bm25Encoder, term_index
from pagesight.models.text import language_of, normalize_text, query_script, tokenize

# --- tokenizer: English -------------------------------------------------------------------------


def test_english_stems_and_drops_stopwords() -> None:
    assert tokenize("The revenues of the company") == tokenize("revenue company")
    assert tokenize("Companies invested in investments") == ["compani", "invest", "invest"]
    assert "the" not in tokenize("the the the") and tokenize("the of and") == []


def test_meaningful_function_words_survive() -> None:
    # Negations and direction words change a financial question's meaning.
    assert tokenize("not up over before") == ["not", "up", "over", "befor"]


def test_numbers_drop_thousands_separators_and_keep_decimals() -> None:
    assert tokenize("$3,226.8 million") == tokenize("3226.8 million")
    assert "3226.8" in tokenize("Revenue was $3,226.8 million")
    assert tokenize("1,234,567") == ["1234567"]
    assert tokenize("0.75") == ["0.75"]
    # A comma not followed by exactly three digits separates numbers.
    assert tokenize("1,2 and 12,3456") == ["1", "2", "12", "3456"]


def test_words_mixing_letters_and_digits_keep_whole_and_parts() -> None:
    assert tokenize("FY2023") == ["fy2023", "fy", "2023"]
    assert "2023" in tokenize("FY2023") and "2023" in tokenize("fiscal 2023")


def test_stemming_can_be_switched_off() -> None:
    assert tokenize("revenues", stem=False) == ["revenues"]
    assert Bm25Encoder(SparseOptions(stemming=False)).tokenize("revenues") == ["revenues"]


def test_underscores_and_garbage_runs_split_or_drop() -> None:
    assert tokenize("net_income") == ["net", "incom"]
    assert tokenize("x" * 100) == []


# --- tokenizer: CJK -----------------------------------------------------------------------------


def test_han_runs_become_overlapping_bigrams() -> None:
    assert tokenize("売上高") == ["売上", "上高"]
    assert tokenize("人工智能的发展") == ["人工", "工智", "智能", "能的", "的发", "发展"]


def test_one_character_run_is_a_unigram() -> None:
    assert tokenize("円") == ["円"]


def test_script_changes_split_runs_and_inline_hiragana_is_dropped() -> None:
    # の / は / を are particles: no bigram spans them, and none is built from them.
    assert tokenize("売上高は増加") == ["売上", "上高", "増加"]
    assert tokenize("ソルベンシー・マージン比率") == [
        "ソル", "ルベ", "ベン", "ンシ", "シー", "マー", "ージ", "ジン", "比率"
    ]  # fmt: skip


def test_hiragana_only_run_is_kept() -> None:
    assert tokenize("「たばこ」の税率") == ["たば", "ばこ", "税率"]


def test_mixed_japanese_sentence_with_numbers() -> None:
    tokens = tokenize("令和6年の売上高は3,226億円")
    assert tokens == ["令和", "6", "年", "売上", "上高", "3226", "億円"]


def test_full_width_characters_normalise_to_ascii() -> None:
    assert tokenize("３，２２６億円") == tokenize("3,226億円") == ["3226", "億円"]
    assert tokenize("ＡＢＣ株式会社") == ["abc", "株式", "式会", "会社"]
    assert tokenize("令和６年") == tokenize("令和6年")
    assert normalize_text("ﾃﾞｰﾀ") == "データ"  # half-width katakana


def test_hangul_runs_become_bigrams() -> None:
    assert tokenize("한국어 분석") == ["한국", "국어", "분석"]


# --- script detection ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "script", "language"),
    [
        ("What was the total revenue in 2023?", "latin", "en"),
        ("令和6年の売上高は？", "cjk", "ja"),
        ("景況判断BSIについて教えてください", "cjk", "ja"),
        ("人工智能的发展", "cjk", "zh"),
        ("한국어 형태소 분석", "cjk", "ko"),
        ("What does 景気 mean?", "mixed", "en"),
        ("Привет мир", "latin", None),
        ("2023", "latin", None),
        ("", "latin", None),
    ],
)
def test_query_script_and_language(text: str, script: str, language: str | None) -> None:
    assert query_script(text) == script
    assert language_of(text) == language


# --- encoder ------------------------------------------------------------------------------------


def test_encoder_meets_the_protocol_and_names_its_parameters() -> None:
    encoder = Bm25Encoder()
    assert isinstance(encoder, SparseEncoder)
    assert encoder.model_id == "pagesight-bm25-v1:k1=1.2,b=0.75,avg_len=256,stem=snowball_en"
    assert Bm25Encoder(SparseOptions(k1=1.5)).model_id != encoder.model_id
    assert Bm25Encoder(SparseOptions(stemming=False)).model_id.endswith("stem=none")


def test_term_index_is_a_fixed_crc32() -> None:
    # Fixed values: the index stores these, so they must not change between runs or machines.
    assert term_index("売上") == 4163730999
    assert term_index("revenu") == 2107883589
    assert all(0 <= term_index(t) < 2**32 for t in tokenize("令和6年の売上高 revenue"))


def test_document_vectors_are_deterministic_sorted_and_unique() -> None:
    texts = ["Revenue grew 12% in FY2023.", "令和6年の売上高は3,226億円", ""]
    first = Bm25Encoder().encode_documents(texts)
    second = Bm25Encoder().encode_documents(texts)
    assert first == second
    for vector in first[:2]:
        assert vector.indices == sorted(set(vector.indices))
        assert all(v > 0 for v in vector.values)
    assert first[2] == SparseVector()


def _weight(vector: SparseVector, term: str) -> float:
    return dict(zip(vector.indices, vector.values, strict=True))[term_index(term)]


def test_term_frequency_saturates_at_k1_plus_one() -> None:
    encoder = Bm25Encoder(SparseOptions(k1=1.2, b=0.0))
    one, two, three, fifty = (
        _weight(encoder.encode_documents(["profit " * n])[0], "profit") for n in (1, 2, 3, 50)
    )
    assert one == pytest.approx(1.0)  # b=0: tf*(k1+1)/(tf+k1) = 1 at tf=1
    assert one < two < three < fifty < 2.2  # bounded by k1 + 1
    assert three - two < two - one  # each repeat adds less


def test_longer_documents_weigh_a_term_less_unless_b_is_zero() -> None:
    short, long = "profit margin", "profit " + " ".join(f"filler{i}" for i in range(500))
    normalised = Bm25Encoder(SparseOptions(b=0.75, avg_len=256))
    assert _weight(normalised.encode_documents([long])[0], "profit") < _weight(
        normalised.encode_documents([short])[0], "profit"
    )
    flat = Bm25Encoder(SparseOptions(b=0.0))
    assert _weight(flat.encode_documents([long])[0], "profit") == pytest.approx(
        _weight(flat.encode_documents([short])[0], "profit")
    )


def test_document_weight_matches_the_bm25_formula() -> None:
    text = "売上高 売上高 利益"  # tokens: 売上 上高 売上 上高 利益 → len 5
    vector = Bm25Encoder(SparseOptions(k1=1.2, b=0.75, avg_len=10)).encode_documents([text])[0]
    expected = 2 * 2.2 / (2 + 1.2 * (1 - 0.75 + 0.75 * 5 / 10))
    assert _weight(vector, "売上") == pytest.approx(expected)


def test_query_values_are_term_counts() -> None:
    vector = Bm25Encoder().encode_query("profit and profit margin")
    assert _weight(vector, "profit") == 2.0 and _weight(vector, "margin") == 1.0
    assert Bm25Encoder().encode_query("the of") == SparseVector()


# --- retrieval sanity: BM25 = sum over query terms of idf * query value * document weight -------

PASSAGES = [
    "令和6年度の売上高は前年同期比で5.2%増加し、経常利益も6.4%増加した。",
    "火災保険の収益悪化に対し、損害保険各社は保険料率の引上げを実施している。",
    "スプリントレビューではプロダクトの成果を確認し、バックログを見直す。",
    "外国人旅行者の一人当たり旅行支出は韓国、台湾、中国の順に多かった。",
    "クラウド・バイ・デフォルト原則は、政府情報システムの整備に際しクラウドの利用を第一に検討する。",
    "Total revenue increased 12% to $3,226.8 million in fiscal 2023.",
]


def _bm25_scores(query: str) -> np.ndarray:
    encoder = Bm25Encoder()
    documents = encoder.encode_documents(PASSAGES)
    vocabulary = sorted({i for d in documents for i in d.indices})
    column = {index: n for n, index in enumerate(vocabulary)}
    matrix = np.zeros((len(documents), len(vocabulary)))
    for row, document in enumerate(documents):
        for index, value in zip(document.indices, document.values, strict=True):
            matrix[row, column[index]] = value
    document_frequency = (matrix > 0).sum(axis=0)
    n = len(documents)
    idf = np.log((n - document_frequency + 0.5) / (document_frequency + 0.5) + 1.0)
    query_vector = np.zeros(len(vocabulary))
    q = encoder.encode_query(query)
    for index, value in zip(q.indices, q.values, strict=True):
        if index in column:
            query_vector[column[index]] = value
    return np.asarray(matrix @ (query_vector * idf))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("売上高と経常利益が増加した年度は？", 0),
        ("損害保険会社は火災保険の収益改善にどう取り組んでいるか", 1),
        ("「クラウド・バイ・デフォルト原則」とは何ですか？", 4),
        ("旅行中の支出が最も多かった国はどこですか", 3),
        ("What were the revenues in FY2023?", 5),
    ],
)
def test_bm25_finds_the_right_passage(query: str, expected: int) -> None:
    scores = _bm25_scores(query)
    assert int(np.argmax(scores)) == expected
    assert scores[expected] > 0 and not math.isnan(float(scores.sum()))
