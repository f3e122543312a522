"""bench/compare_parse.py's element comparison: what counts as the same table, figure or caption.

Issue 36 item 3 accepts a cheaper layout stage only when every table, figure and caption of the
parse before is found after as the same kind on the same page at IoU >= 0.5 with an identical
caption; these cases pin that rule, including the ones that must fail it.
"""

from __future__ import annotations

import os

import pytest

from bench.compare_parse import compare_elements, environment, iou
from pagesight.core.document import BBox, Element, ElementKind


def _element(
    kind: ElementKind,
    box: tuple[float, float, float, float],
    page: int = 1,
    caption: str | None = None,
    text: str = "",
) -> Element:
    return Element(
        element_id=f"{kind.value}-{page}-{box}",
        doc_id="d",
        kind=kind,
        text=text,
        page_number=page,
        seq=0,
        bbox=BBox.of(box),
        caption=caption,
    )


def test_iou_of_equal_disjoint_and_half_overlapping_boxes() -> None:
    box = BBox.of((0, 0, 10, 10))
    assert iou(box, box) == 1.0
    assert iou(box, BBox.of((20, 20, 30, 30))) == 0.0
    assert iou(box, BBox.of((5, 0, 15, 10))) == pytest.approx(50 / 150)


def test_identical_parses_hold_and_text_elements_are_not_compared() -> None:
    elements = [
        _element(ElementKind.TABLE, (0, 0, 100, 50), caption="Table 1: Revenue"),
        _element(ElementKind.FIGURE, (0, 60, 100, 160), caption="Figure 2"),
        _element(ElementKind.CAPTION, (0, 165, 100, 175), text="Figure 2"),
        _element(ElementKind.TEXT, (0, 200, 100, 300), text="body"),
    ]
    # "after" drops the text element: text is not what the comparison holds a parse to.
    result = compare_elements(elements, elements[:3])
    assert result["holds"]
    assert result["by_kind"]["table"] == {
        "before": 1,
        "found": 1,
        "same_caption": 1,
        "extra_after": 0,
    }


def test_a_slightly_moved_box_is_found_and_a_much_moved_one_is_not() -> None:
    before = [_element(ElementKind.TABLE, (0, 0, 100, 100), caption="T")]
    moved_a_little = [_element(ElementKind.TABLE, (5, 5, 105, 105), caption="T")]
    moved_far = [_element(ElementKind.TABLE, (60, 0, 160, 100), caption="T")]
    assert compare_elements(before, moved_a_little)["holds"]
    result = compare_elements(before, moved_far)
    assert not result["holds"]
    assert result["misses"][0]["why"].startswith("none at IoU")
    assert result["by_kind"]["table"]["extra_after"] == 1


def test_the_same_box_of_another_kind_or_page_or_caption_fails() -> None:
    before = [_element(ElementKind.TABLE, (0, 0, 100, 100), caption="Table 1")]
    assert not compare_elements(before, [_element(ElementKind.FIGURE, (0, 0, 100, 100))])["holds"]
    other_page = [_element(ElementKind.TABLE, (0, 0, 100, 100), page=2, caption="Table 1")]
    assert not compare_elements(before, other_page)["holds"]
    recaptioned = compare_elements(
        before, [_element(ElementKind.TABLE, (0, 0, 100, 100), caption="Table 2")]
    )
    assert recaptioned["misses"][0]["why"] == "caption differs"
    assert recaptioned["by_kind"]["table"]["found"] == 1
    assert recaptioned["by_kind"]["table"]["same_caption"] == 0


def test_one_after_element_cannot_stand_for_two_before_elements() -> None:
    before = [
        _element(ElementKind.FIGURE, (0, 0, 100, 100)),
        _element(ElementKind.FIGURE, (0, 10, 100, 110)),
    ]
    result = compare_elements(before, [_element(ElementKind.FIGURE, (0, 5, 100, 105))])
    assert result["by_kind"]["figure"]["found"] == 1
    assert len(result["misses"]) == 1


def test_environment_overrides_are_undone() -> None:
    key = "PAGESIGHT_TEST_COMPARE_PARSE"
    assert key not in os.environ
    with environment({key: "1"}):
        assert os.environ[key] == "1"
    assert key not in os.environ
