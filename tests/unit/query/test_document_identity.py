"""Which documents a query names (pagesight.query.document_identity): whole names, the start of
a name, tickers and short forms, titles, file names; years and forms as qualifiers; and the
companies that share words, which must never be taken for each other."""

from __future__ import annotations

import pytest

from pagesight.core.identity import DocumentIdentity
from pagesight.query.document_identity import IdentityIndex, query_words

IDENTITIES = {
    "amex22": DocumentIdentity(names=["American Express Company"], kind="10-K", years=[2022]),
    "amex21": DocumentIdentity(names=["American Express Company"], kind="10-K", years=[2021]),
    "aal": DocumentIdentity(names=["American Airlines Group Inc."], kind="10-K", years=[2022]),
    "gm": DocumentIdentity(names=["General Motors Company"], kind="10-K", years=[2022]),
    "ge": DocumentIdentity(names=["General Electric Company"], kind="10-K", years=[2022]),
    "bby": DocumentIdentity(names=["BEST BUY CO., INC."], kind="10-K", years=[2023]),
    "jnj": DocumentIdentity(
        names=["Johnson & Johnson"], aliases=["JNJ"], kind="earnings release", years=[2022]
    ),
    "mgm": DocumentIdentity(
        names=["MGM RESORTS INTERNATIONAL"], aliases=["MGM"], kind="earnings release"
    ),
    "amzn": DocumentIdentity(names=["AMAZON.COM, INC."], kind="10-K", years=[2017]),
    "pew": DocumentIdentity(title="Older Adults and Technology Use"),
    "file": DocumentIdentity(file_name="PEPSICO_2022_10K.pdf"),
    "hex": DocumentIdentity(file_name="0e94b4197b10096b1f4c699701570fbf.pdf"),
}


@pytest.fixture(scope="module")
def index() -> IdentityIndex:
    return IdentityIndex(IDENTITIES.items())


def named(index: IdentityIndex, query: str, admitted: set[str] | None = None) -> list[str]:
    return [
        m.doc_id
        for m in index.mentions(query, lambda d: admitted is None or d in admitted, limit=5)
    ]


def test_a_whole_name_with_its_year_comes_first_and_the_other_year_stays(
    index: IdentityIndex,
) -> None:
    assert named(index, "What was American Express' effective tax rate in FY2022?") == [
        "amex22",
        "amex21",
    ]
    assert named(index, "American Express's 2021 card member loans")[0] == "amex21"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How did American Airlines' fuel cost change?", ["aal"]),
        ("What share of American workers saw wages rise?", []),
        ("General Motors' truck sales in 2022", ["gm"]),
        ("General Electric's aviation orders", ["ge"]),
        ("What is the general trend of revenue?", []),
        ("Which products does Best Buy sell most?", ["bby"]),
        ("the best way to buy a TV", []),
    ],
)
def test_companies_that_share_words_are_never_confused(
    index: IdentityIndex, query: str, expected: list[str]
) -> None:
    assert named(index, query) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How did JnJ's US sales growth compare to international growth?", ["jnj"]),
        ("J&J pharmaceutical sales", ["jnj"]),
        ("What is JNJ's adjusted EPS?", ["jnj"]),
        ("Does AMEX have an improving operating margin?", ["amex22", "amex21"]),
        ("the amex card", []),  # a short form is written with capitals
        ("MGM's Las Vegas Strip EBITDAR", ["mgm"]),
        ("Amazon's capital lease obligations", ["amzn"]),
        ("According to Older Adults and Technology Use, how many seniors go online?", ["pew"]),
        ("In PEPSICO_2022_10K.pdf, what is the net revenue?", ["file"]),
        ("What does the PepsiCo filing say about restructuring?", ["file"]),
    ],
)
def test_short_forms_titles_and_file_names(
    index: IdentityIndex, query: str, expected: list[str]
) -> None:
    assert named(index, query) == expected


def test_a_file_name_of_hex_digits_names_nothing(index: IdentityIndex) -> None:
    assert named(index, "0e94b4197b10096b1f4c699701570fbf chart") == []


def test_only_admitted_documents_are_named(index: IdentityIndex) -> None:
    assert named(index, "American Express revenue", admitted={"amex21", "gm"}) == ["amex21"]
    assert named(index, "American Express revenue", admitted=set()) == []


def test_a_form_that_does_not_fit_weighs_less() -> None:
    index = IdentityIndex(
        [
            ("k", DocumentIdentity(names=["Globex Inc."], kind="10-K", years=[2022])),
            ("er", DocumentIdentity(names=["Globex Inc."], kind="earnings release", years=[2022])),
        ]
    )
    mentions = index.mentions("Globex 10-K 2022 risk factors", lambda d: True)
    assert [m.doc_id for m in mentions] == ["k", "er"]
    assert mentions[0].score > mentions[1].score


def test_query_words_drop_possessives() -> None:
    assert [w.raw for w in query_words("Pepsico's and AMEX’ sales.")] == [
        "Pepsico",
        "and",
        "AMEX",
        "sales",
    ]


def test_file_names_can_be_left_out(index: IdentityIndex) -> None:
    query = "In PEPSICO_2022_10K.pdf, what is the net revenue?"
    assert index.mentions(query, lambda d: True, file_names=False) == []
