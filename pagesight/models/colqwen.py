"""ColQwen2 page and query multi-vectors with colpali-engine
(:class:`pagesight.core.protocols.PageEmbedder`).

A page image becomes one 128-d, L2-normalised vector per token of the prompt that colpali-engine
wraps it in (``<|im_start|>user\\n<|vision_start|>`` + one ``<|image_pad|>`` per merged image
patch + ``<|vision_end|>Describe the image.<|im_end|><|endoftext|>``); a query becomes one per
token of ``query + 10 × <|endoftext|>`` (the "query augmentation" the model was trained with).
Both are compared with MaxSim. Padding rows are dropped by the attention mask, never by token
id: ``<|endoftext|>`` is both the pad token and a real token of every prompt and query.

Image patches and the page: the Qwen2-VL image processor resizes a page (aspect ratio kept up
to rounding) so that both sides are multiples of ``patch_size × merge_size`` = 28 px and the
area is at most ``max_num_visual_tokens × 28²``; it never crops or pads, so the resized image
covers the whole page. Each merged patch is a 28 × 28 cell of that image, i.e. the page divided
into ``rows × cols`` equal cells, where ``(rows, cols) = image_grid_thw[1:] // merge_size``. The
merged patches appear in raster order: patch ``i`` is cell ``(i // cols, i % cols)``. That order
is fixed by the processor (it flattens patches as ``(row block, col block, 2, 2)``, and the
patch merger folds each run of ``merge_size²`` patches into one token) and by the model's 3-D
rotary positions (height id ``i // cols``, width id ``i % cols``); both are checked in
``tests/unit/models/test_colqwen.py``. :func:`patch_boxes` turns that into page-unit boxes.

Batching: pages are grouped by a token budget (``page_batch_tokens``), not a fixed count, because
the language model pads every page of a batch to its longest; pages are sorted by size first so
similar pages share a batch. A page's cost is its visual tokens plus the prompt's text tokens.

Preparing pages (the Qwen2-VL image processor: resize, rescale, normalise, patchify) costs
~40 ms a 1344 × 1792 page on the CPU, more than an H200 spends running the model on it (~26 ms),
so done in line it held GPU throughput to ~15 pages/s (``bench/bench_embed.py``). Pages are
therefore prepared one per task on a thread pool (``prepare_workers``), and the next batch is
submitted before the model runs the current one; :func:`collate_pages` joins the single-page
outputs into exactly what ``process_images`` gives for the whole batch. On the H200 that made
~24 pages/s, but the preparing did not overlap the forward pass there (most likely the GIL: the
forward pass launches its kernels from Python). With the torchvision-based image processor the
resizing and normalising can run on the GPU instead (``prepare_device``; not measured yet, so
off by default).

Weights: ``model`` is a local directory or a hub id; with ``HF_HUB_OFFLINE=1`` a hub id must
already be in the Hugging Face cache. ``vidore/colqwen2-v1.0`` is a LoRA adapter over
``vidore/colqwen2-base``, so both must be cached; a checkpoint with the adapter merged into the
base weights loads from one directory. A checkpoint that lacks any of the model's weights is
refused (transformers would silently initialise them at random).

Traps handled here (colpali-engine 0.3.18, transformers 5.3):

* ``ColQwen2Processor.from_pretrained`` also loads a Qwen2-VL *video* processor, which imports
  torchvision; without torchvision (the CPU profile) it fails. :func:`load_colqwen2_processor`
  uses a subclass whose constructor takes only the image processor and the tokenizer.
* ``Qwen2VLModel`` caches ``rope_deltas`` from the last image batch and applies them to the next
  text-only batch: a query batch of a different size after a page batch then fails (shape
  mismatch), and the model is not safe to share between threads. The cache is cleared before
  every forward pass, and forward passes are serialised by a lock.
* On CUDA the model runs in bfloat16, so its own L2 normalisation is only accurate to ~0.5 %;
  rows are renormalised in float32 here so scores from CPU- and GPU-built indexes agree.

Changing ``max_num_visual_tokens`` changes page vectors: give the options a new ``name`` so the
index schema sees the change and re-indexes.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pagesight.core.errors import ErrorCode, PageSightError, Stage
from pagesight.core.pipelining import one_batch_ahead
from pagesight.core.protocols import PageEmbedding
from pagesight.core.settings import VisualEmbedderOptions
from pagesight.models.hf import (
    hub_offline,
    load_failure,
    model_id_of_dir,
    quiet_transformers,
    resolve_device,
)

if TYPE_CHECKING:
    from PIL import Image

#: Width of ColQwen2's output vectors (``custom_text_proj``; fixed in colpali-engine).
COLQWEN2_DIM = 128
#: Suffix tokens appended to every query (colpali-engine's ``process_queries`` default).
QUERY_AUGMENTATION_TOKENS = 10


@dataclass(eq=False)
class PageVectors:
    """One page as late-interaction vectors (:class:`pagesight.core.protocols.PageEmbedding`).

    ``vectors``: float32 ``[n, dim]``, every non-padding token row, L2-normalised.
    ``image_mask``: bool ``[n]``, True for image-patch rows (``<|image_pad|>`` tokens), one
    contiguous run. ``grid``: ``(rows, cols)`` of merged patches; ``vectors[image_mask][i]`` is
    the cell in row ``i // cols``, column ``i % cols`` (see :func:`patch_boxes`).
    """

    vectors: npt.NDArray[np.float32]
    image_mask: npt.NDArray[np.bool_]
    grid: tuple[int, int]


def patch_boxes(
    grid: tuple[int, int], page_width: float, page_height: float
) -> npt.NDArray[np.float64]:
    """Box ``(x0, y0, x1, y1)`` in page units of every image patch, shape ``[rows * cols, 4]``.

    Patch ``i`` is the cell in row ``i // cols`` and column ``i % cols`` of the page divided into
    ``rows × cols`` equal cells (origin top-left). Exact, not an approximation: the processor
    resizes the whole page (no crop, no padding) to ``rows × 28`` by ``cols × 28`` px, so each
    28 px cell of the model's image maps linearly onto one such box; rounding to multiples of
    28 px only changes the aspect ratio the model sees, not which part of the page a cell is.
    """
    rows, cols = grid
    if rows <= 0 or cols <= 0:
        raise ValueError(f"grid must be positive, got {grid}")
    row, col = np.divmod(np.arange(rows * cols), cols)
    cell_w, cell_h = page_width / cols, page_height / rows
    return np.stack(
        [col * cell_w, row * cell_h, (col + 1) * cell_w, (row + 1) * cell_h], axis=1
    ).astype(np.float64)


def group_by_token_budget(costs: Sequence[int], budget: int) -> list[list[int]]:
    """Indices of ``costs`` grouped into batches whose padded cost fits ``budget``.

    A batch is padded to its longest item, so its cost is ``len(batch) * max(cost)``. Items are
    taken in ascending cost (stable), so similar sizes share a batch; an item above the budget
    forms a batch of its own rather than failing.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    for index in sorted(range(len(costs)), key=lambda i: costs[i]):
        if current and (len(current) + 1) * costs[index] > budget:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def prepares_on_model_device(setting: str, processor: Any, device: Any) -> bool:
    """Whether page images are resized and normalised on the model's device: ``setting`` is
    ``VisualEmbedderOptions.prepare_device``. Only the torchvision-based ("fast") image
    processor can; asked to with the other one, that is a configuration error."""
    from transformers.image_processing_utils_fast import BaseImageProcessorFast

    fast = isinstance(processor.image_processor, BaseImageProcessorFast)
    if setting == "model" and not fast:
        raise PageSightError(
            ErrorCode.EMBED_FAILED,
            Stage.EMBED,
            "PAGESIGHT_VISUAL__PREPARE_DEVICE=model needs the torchvision-based image processor "
            f"({type(processor.image_processor).__name__} is loaded: install torchvision)",
        )
    on_gpu = str(device).startswith("cuda")
    return setting == "model" or (setting == "auto" and fast and on_gpu)


#: Most threads that prepare page images by default (``prepare_workers`` 0).
DEFAULT_PREPARE_WORKERS = 8


def collate_pages(processor: Any, parts: Sequence[Any]) -> Any:
    """One batch from ``process_images`` outputs of one page each, equal to what
    ``process_images`` returns for all the pages at once: rows aligned with the tokens
    (``input_ids``, ``attention_mask``, transformers 5's ``mm_token_type_ids``) padded on the
    tokenizer's side (the pad id for tokens, 0 otherwise), pixel rows zero-padded to the batch's
    most patches, anything else (the grids) stacked."""
    import torch
    from transformers import BatchFeature

    longest = max(int(part["input_ids"].shape[1]) for part in parts)
    left = processor.tokenizer.padding_side == "left"

    def padded(name: str, value: int) -> Any:
        rows = []
        for part in parts:
            row = part[name]
            fill = torch.full(
                (1, longest - row.shape[1]), value, dtype=row.dtype, device=row.device
            )
            rows.append(torch.cat([fill, row] if left else [row, fill], dim=1))
        return torch.cat(rows)

    batch: dict[str, Any] = {}
    for name, first in parts[0].items():
        if name == "pixel_values":
            rows = [part[name][0] for part in parts]
            batch[name] = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True)
        elif first.dim() == 2 and first.shape[1] == parts[0]["input_ids"].shape[1]:
            pad = processor.tokenizer.pad_token_id if name == "input_ids" else 0
            batch[name] = padded(name, pad)
        else:
            batch[name] = torch.cat([part[name] for part in parts])
    return BatchFeature(batch)


@cache
def _image_only_processor_class() -> Any:
    """``ColQwen2Processor`` without the video processor (which needs torchvision).

    ``ProcessorMixin`` derives a processor's parts from its ``__init__`` signature, so dropping
    ``video_processor`` from the signature makes ``from_pretrained`` load only the image
    processor and the tokenizer. Videos are never embedded, so nothing else changes.
    """
    from colpali_engine.models import ColQwen2Processor

    class ImageOnlyColQwen2Processor(ColQwen2Processor):
        def __init__(
            self,
            image_processor: Any = None,
            tokenizer: Any = None,
            chat_template: Any = None,
            **kwargs: Any,
        ) -> None:
            super().__init__(
                image_processor=image_processor,
                tokenizer=tokenizer,
                video_processor=None,
                chat_template=chat_template,
                **kwargs,
            )

    return ImageOnlyColQwen2Processor


def make_colqwen2_processor(image_processor: Any, tokenizer: Any) -> Any:
    """A ColQwen2 processor from an image processor and a tokenizer built in memory."""
    return _image_only_processor_class()(image_processor=image_processor, tokenizer=tokenizer)


def load_colqwen2_processor(source: str, *, local_files_only: bool) -> Any:
    """Load a ColQwen2 processor (image processor + tokenizer) from a directory or hub id."""
    return _image_only_processor_class().from_pretrained(source, local_files_only=local_files_only)


def set_max_visual_tokens(processor: Any, max_num_visual_tokens: int) -> None:
    """Cap page images at ``max_num_visual_tokens`` merged patches, as colpali-engine's
    ``from_pretrained(max_num_visual_tokens=...)`` does (both fields: the processor reads
    ``size["longest_edge"]``, older code ``max_pixels``)."""
    image_processor = processor.image_processor
    cell = int(image_processor.patch_size) * int(image_processor.merge_size)
    max_pixels = max_num_visual_tokens * cell * cell
    image_processor.max_pixels = max_pixels
    image_processor.size = {**image_processor.size, "longest_edge": max_pixels}


class ColQwen2Embedder:
    """Page and query multi-vectors from a ColQwen2 checkpoint; weights load on first use."""

    def __init__(self, options: VisualEmbedderOptions | None = None) -> None:
        self.options = options or VisualEmbedderOptions()
        self._model: Any = None
        self._processor: Any = None
        self._device: Any = None
        self._prompt_tokens = 0
        self._load_lock = threading.Lock()
        # Serialises forward passes: the model caches rope_deltas between calls (module doc).
        self._forward_lock = threading.Lock()
        self._prepare_pool: ThreadPoolExecutor | None = None
        self._thread_state = threading.local()

    @classmethod
    def from_loaded(
        cls, model: Any, processor: Any, options: VisualEmbedderOptions | None = None
    ) -> ColQwen2Embedder:
        """Wrap a ColQwen2 model and processor built in memory (benchmarks with random
        full-size weights, tests); the model stays on its device and in its dtype."""
        embedder = cls(options)
        with embedder._load_lock:
            embedder._attach(model.eval(), processor, model.device)
        return embedder

    @property
    def model_id(self) -> str:
        """The explicit ``name``; else the hub id (also when read from a hub-cache snapshot
        path); else the local directory's name."""
        if self.options.name:
            return self.options.name
        local = self._local_dir()
        return model_id_of_dir(local) if local is not None else self.options.model

    @property
    def dim(self) -> int:
        return int(self._model.dim) if self._model is not None else COLQWEN2_DIM

    def warm_up(self) -> None:
        """Load the processor and weights (once; concurrent callers wait for the first)."""
        if self._model is not None:
            return
        with self._load_lock:
            if self._model is None:
                self._load()

    def embed_pages(self, images: Sequence[Image.Image]) -> list[PageEmbedding]:
        """One :class:`PageVectors` per image, in input order; any mix of page sizes."""
        if len(images) == 0:
            return []
        self.warm_up()
        costs = [self._page_cost(image.size) for image in images]
        results: list[PageEmbedding | None] = [None] * len(images)
        batches = group_by_token_budget(costs, self.options.page_batch_tokens)
        for batch, inputs in one_batch_ahead(
            batches, lambda batch: self._start_preparing([images[i] for i in batch]), self._prepared
        ):
            for index, page in zip(batch, self.embed_prepared(inputs), strict=True):
                results[index] = page
        return [page for page in results if page is not None]

    def close(self) -> None:
        """Stop the page-preparing threads (they also end with the process)."""
        if self._prepare_pool is not None:
            self._prepare_pool.shutdown(wait=False, cancel_futures=True)
            self._prepare_pool = None

    def embed_queries(self, texts: Sequence[str]) -> list[npt.NDArray[np.float32]]:
        """One float32 ``[tokens, dim]`` matrix per query (its own tokens, padding dropped)."""
        if len(texts) == 0:
            return []
        self.warm_up()
        processor = self._processor
        suffix = processor.query_augmentation_token * QUERY_AUGMENTATION_TOKENS
        prefix = getattr(processor, "query_prefix", "")
        out: list[npt.NDArray[np.float32]] = []
        size = self.options.query_batch_size
        for start in range(0, len(texts), size):
            batch = [prefix + text + suffix for text in texts[start : start + size]]
            inputs = processor.process_texts(batch)
            vectors = self._forward(inputs)
            keep = inputs["attention_mask"].cpu().numpy().astype(bool)
            out.extend(_normalised(vectors[i][keep[i]], self.model_id) for i in range(len(batch)))
        return out

    # -- internals ---------------------------------------------------------------------------

    def _prepare_workers(self) -> int:
        return self.options.prepare_workers or min(DEFAULT_PREPARE_WORKERS, os.cpu_count() or 1)

    def _start_preparing(self, images: list[Image.Image]) -> list[Future[Any]] | list[Image.Image]:
        """Submit each page's preparation to the pool; in line (nothing submitted) with one
        worker or one page."""
        workers = self._prepare_workers()
        if workers <= 1 or len(images) <= 1:
            return images
        if self._prepare_pool is None:
            with self._load_lock:
                if self._prepare_pool is None:
                    self._prepare_pool = ThreadPoolExecutor(
                        workers, thread_name_prefix="colqwen2-prepare"
                    )
        return [self._prepare_pool.submit(self._prepare_one, image) for image in images]

    def _prepare_one(self, image: Image.Image) -> Any:
        """One page through this thread's own copy of the processor: a fast tokenizer's
        padding settings are state that concurrent calls would share ("Already borrowed")."""
        processor = getattr(self._thread_state, "processor", None)
        if processor is None:
            processor = self._thread_state.processor = copy.deepcopy(self._processor)
        return processor.process_images([image])

    def prepare_pages(self, images: Sequence[Image.Image]) -> Any:
        """The processor output for ``images`` as one batch, prepared as :meth:`embed_pages`
        prepares a batch (benchmarks time it apart from the model)."""
        self.warm_up()
        return self._prepared(self._start_preparing(list(images)))

    def _prepared(self, pending: list[Future[Any]] | list[Image.Image]) -> Any:
        """The batch's processor output (``BatchFeature``), from submitted tasks or in line."""
        try:
            if pending and isinstance(pending[0], Future):
                parts = [future.result() for future in pending]
                return collate_pages(self._processor, parts)
            return self._processor.process_images(list(pending))
        except (OSError, ValueError) as exc:  # unreadable or unsupported image data
            raise PageSightError(
                ErrorCode.EMBED_FAILED, Stage.EMBED, f"page image could not be processed: {exc}"
            ) from exc

    def embed_prepared(self, inputs: Any) -> list[PageVectors]:
        """Page vectors of one batch made by :meth:`prepare_pages`, in its order."""
        vectors = self._forward(inputs)
        keep = inputs["attention_mask"].cpu().numpy().astype(bool)
        input_ids = inputs["input_ids"].cpu().numpy()
        grids = inputs["image_grid_thw"].cpu().numpy()
        merge = int(self._processor.image_processor.merge_size)
        pages: list[PageVectors] = []
        for i in range(len(grids)):
            image_mask = input_ids[i][keep[i]] == self._processor.image_token_id
            grid = (int(grids[i][1]) // merge, int(grids[i][2]) // merge)
            if int(image_mask.sum()) != grid[0] * grid[1]:
                raise PageSightError(
                    ErrorCode.EMBED_FAILED,
                    Stage.EMBED,
                    f"{self.model_id}: {int(image_mask.sum())} image tokens for a {grid} grid",
                )
            rows = _normalised(vectors[i][keep[i]], self.model_id)
            pages.append(PageVectors(vectors=rows, image_mask=image_mask, grid=grid))
        return pages

    def _forward(self, inputs: Any) -> npt.NDArray[np.float32]:
        """Run the model on processor output; float32 ``[batch, seq, dim]`` on the CPU.

        ``inputs`` stays where it is: the callers read its masks and grids with ``.numpy()``
        afterwards, and ``BatchFeature.to`` moves its tensors in place (on a GPU that broke
        every batch)."""
        import torch

        on_device = {name: tensor.to(self._device) for name, tensor in inputs.items()}
        try:
            with self._forward_lock, torch.inference_mode():
                self._model.rope_deltas = None  # stale deltas from the last image batch
                output = self._model(**on_device)
                array: npt.NDArray[np.float32] = output.float().cpu().numpy()
        except RuntimeError as exc:  # torch raises RuntimeError for OOM and device failures
            raise PageSightError(
                ErrorCode.EMBED_FAILED, Stage.EMBED, f"{self.model_id} failed to embed: {exc}"
            ) from exc
        return array

    def _page_cost(self, size: tuple[int, int]) -> int:
        """Tokens a page of ``size`` (width, height) takes: merged patches + prompt text."""
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

        image_processor = self._processor.image_processor
        patch, merge = int(image_processor.patch_size), int(image_processor.merge_size)
        width, height = size
        try:
            resized_h, resized_w = smart_resize(
                height,
                width,
                factor=patch * merge,
                min_pixels=image_processor.size["shortest_edge"],
                max_pixels=image_processor.size["longest_edge"],
            )
        except (ValueError, ZeroDivisionError) as exc:  # aspect ratio over 200, empty image
            raise PageSightError(
                ErrorCode.EMBED_FAILED,
                Stage.EMBED,
                f"page image of {width}x{height} px cannot be embedded: {exc}",
            ) from exc
        return (resized_h // (patch * merge)) * (resized_w // (patch * merge)) + self._prompt_tokens

    def _local_dir(self) -> Path | None:
        candidate = Path(self.options.model).expanduser()
        return candidate if candidate.is_dir() else None

    def _load(self) -> None:
        import torch

        device = resolve_device(self.options.device, "visual embedder", Stage.EMBED)
        dtype_name = self.options.dtype
        if dtype_name == "auto":
            dtype_name = "bfloat16" if device == "cuda" else "float32"
        dtype = getattr(torch, dtype_name)

        local = self._local_dir()
        source = str(local) if local is not None else self.options.model
        local_files_only = hub_offline() or local is not None
        extra: dict[str, Any] = {}
        if self.options.attn_implementation is not None:
            extra["attn_implementation"] = self.options.attn_implementation
        try:
            with quiet_transformers():
                from colpali_engine.models import ColQwen2

                processor = load_colqwen2_processor(source, local_files_only=local_files_only)
                model, loading_info = ColQwen2.from_pretrained(
                    source,
                    dtype=dtype,
                    local_files_only=local_files_only,
                    output_loading_info=True,
                    **extra,
                )
        except Exception as exc:  # any loader failure (missing files, offline, bad config)
            raise load_failure(
                "ColQwen2 model", source, local, "PAGESIGHT_VISUAL__MODEL", exc, Stage.EMBED
            ) from exc
        missing = sorted(loading_info.get("missing_keys") or ())
        if missing:
            raise PageSightError(
                ErrorCode.EMBED_FAILED,
                Stage.EMBED,
                f"ColQwen2 checkpoint {source!r} lacks {len(missing)} weights "
                f"(e.g. {', '.join(missing[:3])}); refusing to use random ones",
            )
        self._attach(model.to(device).eval(), processor, torch.device(device))

    def _attach(self, model: Any, processor: Any, device: Any) -> None:
        set_max_visual_tokens(processor, self.options.max_num_visual_tokens)
        on_device = prepares_on_model_device(self.options.prepare_device, processor, device)
        if on_device or getattr(processor.image_processor, "device", None) is not None:
            # a fast image processor reads its call defaults from its attributes
            processor.image_processor.device = str(device) if on_device else None
        prompt_ids = processor.tokenizer(processor.visual_prompt_prefix)["input_ids"]
        self._prompt_tokens = len(prompt_ids) - 1  # the one <|image_pad|> expands to the patches
        self._processor = processor
        self._device = device
        self._model = model


def _normalised(rows: npt.NDArray[np.float32], model_id: str) -> npt.NDArray[np.float32]:
    """Rows rescaled to unit length in float32; a non-finite or zero row is an error."""
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise PageSightError(
            ErrorCode.EMBED_FAILED, Stage.EMBED, f"{model_id} produced non-finite vectors"
        )
    normalised: npt.NDArray[np.float32] = rows / norms
    return normalised
