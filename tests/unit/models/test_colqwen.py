"""The ColQwen2 page/query embedder, on a tiny random ColQwen2 built offline.

The tiny checkpoint (pagesight/models/testing/tiny_colqwen.py) loads through the real
``ColQwen2.from_pretrained``, so these tests cover loading, the processor, batching and padding
exactly as with real weights; only the numbers are meaningless. A ``gpu`` test runs real weights
from ``PAGESIGHT_TEST_COLQWEN_DIR`` when that and a CUDA device are present.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from pagesight.core.errors import ErrorCode, PageSightError
from pagesight.core.protocols import PageEmbedder, PageEmbedding
from pagesight.core.settings import Settings, VisualEmbedderOptions
from pagesight.models.colqwen import (
    COLQWEN2_DIM,
    QUERY_AUGMENTATION_TOKENS,
    ColQwen2Embedder,
    PageVectors,
    collate_pages,
    group_by_token_budget,
    load_colqwen2_processor,
    patch_boxes,
    prepares_on_model_device,
    set_max_visual_tokens,
)
from pagesight.models.testing.tiny_colqwen import TINY_MAX_VISUAL_TOKENS, build_tiny_colqwen2

os.environ["HF_HUB_OFFLINE"] = "1"


def _page(seed: int, width: int, height: int, mode: str = "RGB") -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return Image.fromarray(pixels).convert(mode)


#: Portrait A4 at 72 dpi, landscape, a tiny square, a tall strip, and a greyscale page: each
#: gets a different grid, so one batch needs left padding.
MIXED_PAGES = [
    _page(0, 595, 842),
    _page(1, 700, 400),
    _page(2, 90, 90),
    _page(3, 300, 2000),
    _page(4, 842, 595, mode="L"),
]
QUERIES = ["revenue", "What was the total revenue in 2023 by segment and region?", ""]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_colqwen2(tmp_path_factory.mktemp("tiny-colqwen2") / "tiny-colqwen2")


@pytest.fixture(scope="module")
def options(tiny_dir: Path) -> VisualEmbedderOptions:
    return VisualEmbedderOptions(
        model=str(tiny_dir), device="cpu", max_num_visual_tokens=TINY_MAX_VISUAL_TOKENS
    )


@pytest.fixture(scope="module")
def embedder(options: VisualEmbedderOptions) -> Iterator[ColQwen2Embedder]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model = ColQwen2Embedder(options)
    model.warm_up()
    yield model
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def mixed(embedder: ColQwen2Embedder) -> list[PageEmbedding]:
    return embedder.embed_pages(MIXED_PAGES)


def test_identity_without_loading(tiny_dir: Path) -> None:
    fresh = ColQwen2Embedder(VisualEmbedderOptions(model=str(tiny_dir)))
    assert fresh.model_id == "tiny-colqwen2" and fresh.dim == COLQWEN2_DIM
    named = ColQwen2Embedder(VisualEmbedderOptions(model=str(tiny_dir), name="colqwen2-v1.0@512"))
    assert named.model_id == "colqwen2-v1.0@512"
    assert ColQwen2Embedder().model_id == "vidore/colqwen2-v1.0"  # a hub id, nothing loaded


def test_meets_the_protocol(embedder: ColQwen2Embedder) -> None:
    assert isinstance(embedder, PageEmbedder)
    assert embedder.dim == COLQWEN2_DIM


def test_page_shapes_grid_and_image_rows(
    embedder: ColQwen2Embedder, mixed: list[PageEmbedding]
) -> None:
    assert len(mixed) == len(MIXED_PAGES)
    prompt_rows = {int((~page.image_mask).sum()) for page in mixed}
    assert len(prompt_rows) == 1 and prompt_rows.pop() > 0  # same prompt text for every page
    for image, page in zip(MIXED_PAGES, mixed, strict=True):
        rows, cols = page.grid
        assert isinstance(page, PageVectors)
        assert page.vectors.dtype == np.float32 and page.vectors.shape[1] == COLQWEN2_DIM
        assert page.image_mask.dtype == np.bool_ and page.image_mask.shape == (len(page.vectors),)
        assert int(page.image_mask.sum()) == rows * cols <= TINY_MAX_VISUAL_TOKENS
        # Image rows are one contiguous run (the <|image_pad|> span of the prompt).
        image_rows = np.flatnonzero(page.image_mask)
        assert np.array_equal(image_rows, np.arange(image_rows[0], image_rows[0] + rows * cols))
        width, height = image.size
        assert (cols > rows) == (width > height) or width == height
    assert mixed[0].grid == (9, 6)  # A4 portrait within 64 patches: 168 x 252 px


def test_rows_are_finite_and_unit_length(mixed: list[PageEmbedding]) -> None:
    for page in mixed:
        assert np.isfinite(page.vectors).all()
        np.testing.assert_allclose(np.linalg.norm(page.vectors, axis=1), 1.0, atol=1e-5)


def test_same_input_gives_identical_output(
    embedder: ColQwen2Embedder, mixed: list[PageEmbedding]
) -> None:
    again = embedder.embed_pages(MIXED_PAGES)
    for first, second in zip(mixed, again, strict=True):
        assert np.array_equal(first.vectors, second.vectors)
        assert np.array_equal(first.image_mask, second.image_mask) and first.grid == second.grid
    assert all(
        np.array_equal(a, b)
        for a, b in zip(
            embedder.embed_queries(QUERIES), embedder.embed_queries(QUERIES), strict=True
        )
    )


def test_mixed_sizes_in_one_batch_equal_each_page_alone(
    embedder: ColQwen2Embedder, mixed: list[PageEmbedding]
) -> None:
    for image, batched in zip(MIXED_PAGES, mixed, strict=True):
        (alone,) = embedder.embed_pages([image])
        assert alone.grid == batched.grid
        assert np.array_equal(alone.image_mask, batched.image_mask)
        np.testing.assert_allclose(alone.vectors, batched.vectors, atol=1e-4)


def test_token_budget_batches_equal_one_batch(
    options: VisualEmbedderOptions, mixed: list[PageEmbedding]
) -> None:
    # A budget of 100 tokens splits the five pages into several batches, one page of 72 tokens
    # on its own; the default budget takes them all at once.
    small = ColQwen2Embedder(options.model_copy(update={"page_batch_tokens": 100}))
    for split, whole in zip(small.embed_pages(MIXED_PAGES), mixed, strict=True):
        assert split.grid == whole.grid
        np.testing.assert_allclose(split.vectors, whole.vectors, atol=1e-4)


def test_pages_prepared_one_by_one_collate_to_the_batch_output(tiny_dir: Path) -> None:
    """Padding side and id, mask, zero-padded pixel rows and grids: every tensor equal to what
    the processor gives for the whole batch of mixed sizes."""
    processor = load_colqwen2_processor(str(tiny_dir), local_files_only=True)
    set_max_visual_tokens(processor, TINY_MAX_VISUAL_TOKENS)
    whole = processor.process_images(MIXED_PAGES)
    joined = collate_pages(processor, [processor.process_images([page]) for page in MIXED_PAGES])
    assert sorted(joined.keys()) == sorted(whole.keys())
    for name in whole:
        assert joined[name].dtype == whole[name].dtype, name
        assert joined[name].equal(whole[name]), name


def test_prepared_on_threads_and_ahead_equals_in_line(
    options: VisualEmbedderOptions, mixed: list[PageEmbedding]
) -> None:
    """Three batches (of 2, 2 and 1 pages), pages prepared on 3 threads and the next batch
    prepared while the model runs: the same vectors as preparing in line."""
    serial = ColQwen2Embedder(options.model_copy(update={"prepare_workers": 1}))
    threaded = ColQwen2Embedder(
        options.model_copy(update={"prepare_workers": 3, "page_batch_tokens": 150})
    )
    try:
        in_line = serial.embed_pages(MIXED_PAGES)
        ahead = threaded.embed_pages(MIXED_PAGES)
        assert threaded._prepare_pool is not None  # the threads did the work
        for a, b, c in zip(ahead, in_line, mixed, strict=True):
            assert a.grid == b.grid == c.grid
            np.testing.assert_allclose(a.vectors, b.vectors, atol=1e-5)
    finally:
        threaded.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_an_unreadable_page_is_embed_failed_in_line_and_on_threads(
    options: VisualEmbedderOptions, workers: int
) -> None:
    import io

    data = io.BytesIO()
    _page(5, 300, 400).save(data, format="PNG")
    truncated = Image.open(io.BytesIO(data.getvalue()[: len(data.getvalue()) // 2]))
    embedder = ColQwen2Embedder(options.model_copy(update={"prepare_workers": workers}))
    try:
        with pytest.raises(PageSightError) as caught:
            embedder.embed_pages([MIXED_PAGES[0], truncated])
        assert caught.value.code == ErrorCode.EMBED_FAILED
        assert "could not be processed" in caught.value.message
    finally:
        embedder.close()


def test_where_pages_are_prepared(tiny_dir: Path) -> None:
    """On the model's GPU only with the torchvision-based image processor (auto), or when
    asked; asked with the other processor, a clear EMBED_FAILED error."""
    from types import SimpleNamespace

    from transformers.image_processing_utils_fast import BaseImageProcessorFast

    class FastStandIn(BaseImageProcessorFast):
        """Its type is all that is read; the real one needs torchvision to be built."""

    slow = load_colqwen2_processor(str(tiny_dir), local_files_only=True)
    fast = SimpleNamespace(image_processor=FastStandIn.__new__(FastStandIn))
    assert prepares_on_model_device("auto", fast, "cuda:0")
    assert not prepares_on_model_device("auto", fast, "cpu")
    assert not prepares_on_model_device("auto", slow, "cuda")
    assert not prepares_on_model_device("cpu", fast, "cuda")
    assert prepares_on_model_device("model", fast, "cuda")
    with pytest.raises(PageSightError) as caught:
        prepares_on_model_device("model", slow, "cuda")
    assert caught.value.code == ErrorCode.EMBED_FAILED
    assert "torchvision" in caught.value.message


def test_group_by_token_budget() -> None:
    assert group_by_token_budget([], 10) == []
    # Ascending cost; a batch costs its size times its largest item.
    assert group_by_token_budget([5, 1, 3, 2], 9) == [[1, 3, 2], [0]]
    assert group_by_token_budget([5, 1, 3, 2], 6) == [[1, 3], [2], [0]]
    assert group_by_token_budget([50, 4], 10) == [[1], [0]]  # over budget: a batch of its own
    assert group_by_token_budget([2, 2, 2, 2], 8) == [[0, 1, 2, 3]]


def test_queries_drop_padding_rows(embedder: ColQwen2Embedder, tiny_dir: Path) -> None:
    tokenizer = load_colqwen2_processor(str(tiny_dir), local_files_only=True).tokenizer
    suffix = "<|endoftext|>" * QUERY_AUGMENTATION_TOKENS
    batched = embedder.embed_queries(QUERIES)
    lengths = [len(tokenizer(query + suffix)["input_ids"]) for query in QUERIES]
    assert len(set(lengths)) == len(QUERIES)  # different lengths: the batch is padded
    for query, vectors, length in zip(QUERIES, batched, lengths, strict=True):
        assert vectors.shape == (length, COLQWEN2_DIM) and vectors.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        (alone,) = embedder.embed_queries([query])
        np.testing.assert_allclose(alone, vectors, atol=1e-4)


def test_queries_after_pages_of_another_batch_size(embedder: ColQwen2Embedder) -> None:
    # Qwen2VLModel caches rope_deltas from an image batch; reused for a text batch of another
    # size it raised a shape error (and would have shifted positions of a same-size batch).
    before = embedder.embed_queries(QUERIES)
    embedder.embed_pages(MIXED_PAGES[:2])
    after = embedder.embed_queries(QUERIES)
    single_after = embedder.embed_queries(QUERIES[:1])
    for a, b in zip(before, after, strict=True):
        assert np.array_equal(a, b)
    np.testing.assert_allclose(single_after[0], before[0], atol=1e-4)


def test_empty_inputs(embedder: ColQwen2Embedder) -> None:
    assert embedder.embed_pages([]) == [] and embedder.embed_queries([]) == []


def test_merged_patches_are_in_raster_order(embedder: ColQwen2Embedder, tiny_dir: Path) -> None:
    """Patch i is cell (i // cols, i % cols) of the page, in the processor's pixel layout and in
    the 3-D rotary positions the language model gives image tokens."""
    import torch

    processor = load_colqwen2_processor(str(tiny_dir), local_files_only=True)
    set_max_visual_tokens(processor, TINY_MAX_VISUAL_TOKENS)
    # 168 x 112 px is already a multiple of 28: no resize, a 4 x 6 grid of 28 px cells. Mark
    # one cell white on black and find which merged patch carries it.
    rows, cols, mark_row, mark_col = 6, 4, 4, 1
    pixels = np.zeros((rows * 28, cols * 28, 3), dtype=np.uint8)
    pixels[mark_row * 28 : (mark_row + 1) * 28, mark_col * 28 : (mark_col + 1) * 28] = 255
    inputs = processor.process_images([Image.fromarray(pixels)])
    _, grid_h, grid_w = inputs["image_grid_thw"][0].tolist()
    assert (grid_h // 2, grid_w // 2) == (rows, cols)
    patches = inputs["pixel_values"][0][: grid_h * grid_w]  # 4 raw 14 px patches per cell
    bright = patches.reshape(rows * cols, 4, -1).mean(dim=(1, 2)) > 0
    assert torch.nonzero(bright).flatten().tolist() == [mark_row * cols + mark_col]

    model = embedder._model  # the loaded ColQwen2 (a Qwen2VLModel)
    position_ids, _ = model.get_rope_index(
        inputs["input_ids"],
        mm_token_type_ids=inputs["mm_token_type_ids"],
        image_grid_thw=inputs["image_grid_thw"],
        attention_mask=inputs["attention_mask"],
    )
    image = inputs["input_ids"][0] == processor.image_token_id
    _, heights, widths = position_ids[:, 0, image]
    index = torch.arange(rows * cols)
    assert torch.equal(heights - heights.min(), index // cols)
    assert torch.equal(widths - widths.min(), index % cols)


def test_patch_boxes_tile_the_page() -> None:
    boxes = patch_boxes((3, 2), page_width=612.0, page_height=792.0)
    assert boxes.shape == (6, 4)
    np.testing.assert_allclose(boxes[0], [0, 0, 306, 264])
    np.testing.assert_allclose(boxes[3], [306, 264, 612, 528])  # row 1, col 1
    np.testing.assert_allclose(boxes[5], [306, 528, 612, 792])
    area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])).sum()
    assert area == pytest.approx(612 * 792)
    with pytest.raises(ValueError):
        patch_boxes((0, 3), 10, 10)


def test_checkpoint_loads_every_weight_it_holds(tiny_dir: Path) -> None:
    import torch
    from colpali_engine.models import ColQwen2
    from safetensors.torch import load_file

    model, info = ColQwen2.from_pretrained(
        str(tiny_dir), local_files_only=True, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    stored = load_file(str(tiny_dir / "model.safetensors"))
    loaded = model.state_dict()
    assert len(stored) == len(loaded)
    for key, tensor in stored.items():
        name = "language_model." + key.removeprefix("model.") if key.startswith("model.") else key
        assert torch.equal(loaded[name], tensor), key


def test_checkpoint_missing_weights_is_refused(tiny_dir: Path, tmp_path: Path) -> None:
    import shutil

    from safetensors.torch import load_file, save_file

    broken = tmp_path / "broken"
    shutil.copytree(tiny_dir, broken)
    weights = load_file(str(broken / "model.safetensors"))
    weights = {k: v for k, v in weights.items() if not k.startswith("custom_text_proj")}
    save_file(weights, str(broken / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(PageSightError) as caught:
        ColQwen2Embedder(VisualEmbedderOptions(model=str(broken), device="cpu")).warm_up()
    assert caught.value.code == ErrorCode.EMBED_FAILED
    assert "custom_text_proj" in caught.value.message


def test_missing_model_is_embed_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAGESIGHT_VISUAL__MODEL", str(tmp_path / "no-such-model"))
    embedder = ColQwen2Embedder(Settings().visual)  # constructing loads nothing
    with pytest.raises(PageSightError) as caught:
        embedder.embed_pages([_page(0, 100, 100)])
    assert caught.value.code == ErrorCode.EMBED_FAILED
    assert "PAGESIGHT_VISUAL__MODEL" in caught.value.message

    offline_hub = ColQwen2Embedder(VisualEmbedderOptions(model="vidore/no-such-colqwen2"))
    with pytest.raises(PageSightError) as caught:
        offline_hub.embed_queries(["q"])
    assert caught.value.code == ErrorCode.EMBED_FAILED
    assert "PAGESIGHT_VISUAL__MODEL" in caught.value.message


def test_extreme_aspect_ratio_is_embed_failed(embedder: ColQwen2Embedder) -> None:
    with pytest.raises(PageSightError) as caught:
        embedder.embed_pages([_page(0, 2, 500)])
    assert caught.value.code == ErrorCode.EMBED_FAILED


class _AcceleratorModel:
    """Stands in for ColQwen2 on a GPU: the meta device holds no data, so reading an input
    that was moved there with ``.numpy()`` fails the way a CUDA tensor does, on any machine."""

    def __init__(self) -> None:
        import torch

        self.device = torch.device("meta")
        self.rope_deltas: object = None
        self.input_devices: set[str] = set()

    def eval(self) -> _AcceleratorModel:
        return self

    def __call__(self, **inputs: object) -> object:
        import torch

        self.input_devices |= {t.device.type for t in inputs.values() if torch.is_tensor(t)}
        batch, seq = inputs["input_ids"].shape  # type: ignore[attr-defined]
        return torch.randn(batch, seq, COLQWEN2_DIM)  # what .float().cpu() gives back


def test_inputs_stay_readable_after_the_model_ran_on_another_device(tiny_dir: Path) -> None:
    """The model gets its inputs on its own device, while the masks and grids read after the
    forward pass stay on the CPU (moving the processor output in place broke every batch on
    an H200)."""
    model = _AcceleratorModel()
    embedder = ColQwen2Embedder.from_loaded(
        model,
        load_colqwen2_processor(str(tiny_dir), local_files_only=True),
        VisualEmbedderOptions(model=str(tiny_dir), max_num_visual_tokens=TINY_MAX_VISUAL_TOKENS),
    )
    pages = embedder.embed_pages(MIXED_PAGES[:2])
    queries = embedder.embed_queries(QUERIES[:2])
    assert model.input_devices == {"meta"}
    assert [p.grid[0] * p.grid[1] for p in pages] == [int(p.image_mask.sum()) for p in pages]
    assert len(queries) == 2 and all(q.shape[1] == COLQWEN2_DIM for q in queries)


def _text_page(lines: list[str]) -> Image.Image:
    page = Image.new("RGB", (1240, 1754), "white")  # A4 at 150 dpi
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=48)
    for n, line in enumerate(lines):
        draw.text((100, 150 + 90 * n), line, fill="black", font=font)
    return page


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, b)  # rows are unit length


@pytest.mark.gpu
def test_tiny_model_on_cuda_gives_the_cpu_vectors(
    options: VisualEmbedderOptions, mixed: list[PageEmbedding], embedder: ColQwen2Embedder
) -> None:
    """The whole embedder on a GPU, loaded from the same checkpoint: float32 gives the CPU's
    rows (up to TF32 convolutions), bfloat16 (the GPU default) the same grids and masks with
    rows close to them, and so do pages resized on the GPU (torchvision's processor). Needs no
    real weights, so every GPU machine runs it."""
    import torch

    from pagesight.models.testing.tiny_colqwen import torchvision_works

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    cpu_queries = embedder.embed_queries(QUERIES)
    runs = [("float32", "cpu", 0.999), ("auto", "cpu", 0.9)]
    if torchvision_works():
        runs.append(("float32", "model", 0.98))
    for dtype, where, floor in runs:
        on_gpu = ColQwen2Embedder(
            options.model_copy(update={"device": "cuda", "dtype": dtype, "prepare_device": where})
        )
        pages = on_gpu.embed_pages(MIXED_PAGES)
        assert [p.grid for p in pages] == [p.grid for p in mixed]
        for gpu_page, cpu_page in zip(pages, mixed, strict=True):
            assert np.array_equal(gpu_page.image_mask, cpu_page.image_mask)
            assert _cosines(gpu_page.vectors, cpu_page.vectors).mean() >= floor, (dtype, where)
        queries = on_gpu.embed_queries(QUERIES)
        for gpu_query, cpu_query in zip(queries, cpu_queries, strict=True):
            assert gpu_query.shape == cpu_query.shape
            assert _cosines(gpu_query, cpu_query).mean() >= floor, (dtype, where)


@pytest.mark.gpu
def test_real_weights_on_cuda() -> None:
    """Real ColQwen2 weights rank the page that answers a query first (MaxSim)."""
    import torch

    weights = os.environ.get("PAGESIGHT_TEST_COLQWEN_DIR")
    if not weights or not Path(weights).is_dir():
        pytest.skip("set PAGESIGHT_TEST_COLQWEN_DIR to a local ColQwen2 checkpoint directory")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    embedder = ColQwen2Embedder(VisualEmbedderOptions(model=weights, device="cuda"))
    pages = embedder.embed_pages(
        [
            _text_page(["Quarterly revenue", "Q1 2023: $4.2 billion", "Q2 2023: $4.6 billion"]),
            _text_page(["Cat care guide", "Feed your cat twice a day", "Brush its fur weekly"]),
        ]
    )
    for page in pages:
        assert page.vectors.shape[1] == COLQWEN2_DIM and np.isfinite(page.vectors).all()
        assert int(page.image_mask.sum()) == page.grid[0] * page.grid[1] <= 768
    queries = embedder.embed_queries(
        ["What was the revenue in Q2 2023?", "How often to feed a cat?"]
    )

    def maxsim(query: np.ndarray, page: PageEmbedding) -> float:
        return float((query @ page.vectors.T).max(axis=1).sum())

    scores = np.array([[maxsim(q, p) for p in pages] for q in queries])
    assert scores[0, 0] > scores[0, 1] and scores[1, 1] > scores[1, 0], scores
