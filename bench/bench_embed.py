"""Page-embedding throughput of ColQwen2: pages/s, peak memory and model FLOP utilisation (MFU).

The model is the full-size ColQwen2 architecture (Qwen2-VL-2B widths: 28 text layers of 1536,
32 ViT blocks of 1280; ``pagesight.models.testing.tiny_colqwen.build_random_colqwen2``) with random
weights, built in memory: throughput does not depend on weight values, and no checkpoint is needed.
Pages go through the real :class:`pagesight.models.colqwen.ColQwen2Embedder` (processor, forward
pass, padding removal, float32 renormalisation), one forward pass per batch.

Pages are synthetic 1344 × 1792 px images (a 3:4 page at ~160 dpi, random noise): the processor
resizes them to 672 × 896 px, exactly 24 × 32 = 768 merged patches at ``--visual-tokens 768``.

Per batch size B the report gives:

* ``pages_per_s``: B / median wall time of ``embed_pages`` (preprocessing included).
* ``preprocess_s``: the processor alone on the same B pages in line (CPU work: resize,
  normalise, patchify, tokenize); ``prepare_s``: the same pages as the embedder prepares them
  (one page per task on ``prepare_workers`` threads); ``device_s``: the model alone on the
  prepared batch (``embed_prepared``), synchronised. Each the median of the same number of runs.
* ``stream`` (``--stream-pages N``): N pages in one ``embed_pages`` call with the default token
  budget per forward pass, pages prepared in line, then on threads with the next batch
  prepared while the model runs, then (GPU with torchvision) also resized on the GPU: the
  bulk-job figure. The batch rows prepare as the settings' defaults do (``prepare_device``).
* ``mfu``: model FLOPs per batch / ``device_s`` / peak FLOP/s. FLOPs per page are counted
  analytically (multiply-add = 2 FLOPs; norms, activations, softmax and rotary are left out):

      P = 4 T image patches (T merged tokens), S = T + prompt tokens, E = ViT width,
      H = text width, I = MLP width, K = key/value width (KV heads × head dim)
      vision   = 2 P (1176 E)                              patch embedding (3 × 2 × 14 × 14 in)
               + depth × (2 P × 12 E² + 4 P² E)             qkv+proj+MLP(4E), full attention
               + 2 T (16 E² + 4 E H)                        patch merger (4E → 4E → H)
      text     = layers × (2 S (2 H² + 2 H K + 3 H I) + 2 S² H)   q,o,k,v, gated MLP; causal
                                                                  attention counts half of S²
      project  = 2 S H × 128

  The peak is ``--peak-tflops`` where given; else on CUDA the H200's dense bf16 figure
  (989.5 TFLOP/s; a bf16 8192³ matmul measures ~790 on these machines, so ``mfu_vs_matmul``
  is also reported against a matmul measured in the same run), and on CPU the measured fp32
  matmul rate (a 2048³ product, best of five, same thread count), said so in ``peak_source``.
* Peak memory: on CUDA ``torch.cuda.max_memory_allocated`` over the batch's runs (weights
  included; ``weights_gib`` separately); on CPU the growth of the process's max RSS since just
  before the model was built (``ru_maxrss`` is a high-water mark, so it never falls between
  batch sizes).

CPU runs default to a reduced model (2 text layers, 2 ViT blocks, batch sizes 1, 2, 4; the JSON
says ``reduced: true``): a full-size page takes 80-160 s on a 2-core CPU. CUDA runs default to
the full model in bf16 and batch sizes 1-64; a batch that runs out of memory is recorded as such
and the run goes on.

Run from the repo root:
``.venv/bin/python -m bench.bench_embed --device cpu --out var/bench/embed_cpu.json``, or on a GPU
machine ``python3 -m bench.bench_embed --device cuda --out embed_cuda.json``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

#: Page size whose resize at 768 visual tokens is exactly 672 x 896 px (24 x 32 merged patches).
PAGE_SIZE = (1344, 1792)
H200_BF16_DENSE_TFLOPS = 989.5
CPU_DEFAULT_LAYERS = 2
CPU_DEFAULT_BATCH_SIZES = "1,2,4"
CUDA_DEFAULT_BATCH_SIZES = "1,2,4,8,16,32,64"


def page_flops(config: Any, visual_tokens: int, prompt_tokens: int) -> dict[str, float]:
    """Analytic forward FLOPs of one page (formula in the module doc), by part."""
    vision, text = config.vision_config, config.text_config
    merge2 = vision.spatial_merge_size**2
    patches = visual_tokens * merge2
    embed_in = vision.in_channels * vision.temporal_patch_size * vision.patch_size**2
    e, h, i = vision.embed_dim, text.hidden_size, text.intermediate_size
    kv = text.num_key_value_heads * (h // text.num_attention_heads)
    s = visual_tokens + prompt_tokens
    mlp = vision.mlp_ratio
    vision_flops = (
        2 * patches * embed_in * e
        + vision.depth * (2 * patches * (4 * e * e + 2 * mlp * e * e) + 4 * patches**2 * e)
        + 2 * visual_tokens * ((merge2 * e) ** 2 + merge2 * e * h)
    )
    text_flops = text.num_hidden_layers * (
        2 * s * (2 * h * h + 2 * h * kv + 3 * h * i) + 2 * s * s * h
    )
    project_flops = 2 * s * h * 128
    return {
        "vision": float(vision_flops),
        "text": float(text_flops),
        "project": float(project_flops),
        "total": float(vision_flops + text_flops + project_flops),
    }


def parameter_counts(model: Any) -> dict[str, int]:
    """Parameters by part, counted on the built model."""
    visual = sum(p.numel() for p in model.visual.parameters())
    embed = model.language_model.embed_tokens.weight.numel()
    text = sum(p.numel() for p in model.language_model.parameters()) - embed
    project = sum(p.numel() for p in model.custom_text_proj.parameters())
    return {"vision": visual, "text_layers": text, "token_embedding": embed, "project": project}


def measure_matmul_tflops(torch: Any, device: str, dtype: Any) -> float:
    """Best-of-N dense matmul rate on this device: the practical peak for MFU."""
    n = 8192 if device == "cuda" else 2048
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for attempt in range(8 if device == "cuda" else 6):
        sync(torch, device)
        started = time.perf_counter()
        for _ in range(10 if device == "cuda" else 1):
            a @ b
        sync(torch, device)
        elapsed = (time.perf_counter() - started) / (10 if device == "cuda" else 1)
        if attempt >= (3 if device == "cuda" else 1):  # warm-up first
            best = min(best, elapsed)
    return 2 * n**3 / best / 1e12


def sync(torch: Any, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def synthetic_pages(count: int, seed: int = 0) -> list[Image.Image]:
    """Noise pages of :data:`PAGE_SIZE`; content does not change the work done."""
    rng = np.random.default_rng(seed)
    width, height = PAGE_SIZE
    return [
        Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
        for _ in range(count)
    ]


def max_rss_mib() -> float:
    """This process's max resident set so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass(frozen=True, kw_only=True)
class BatchPlan:
    """How every batch size is measured, and what its FLOP/s are compared with."""

    device: str
    repeats: int
    warmup: int
    flops_per_page: float
    peak_tflops: float
    matmul_tflops: float
    rss_base_mib: float


def bench_batch(
    torch: Any, embedder: Any, processor: Any, pages: list[Image.Image], plan: BatchPlan
) -> dict[str, Any]:
    batch = len(pages)
    row: dict[str, Any] = {"batch_size": batch}
    try:
        for _ in range(plan.warmup):
            embedder.embed_pages(pages)
        if plan.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        inline_times, prepare_times, model_times = [], [], []
        for _ in range(plan.repeats):
            started = time.perf_counter()
            processor.process_images(pages)
            inline_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            inputs = embedder.prepare_pages(pages)
            prepare_times.append(time.perf_counter() - started)
            sync(torch, plan.device)
            started = time.perf_counter()
            embedder.embed_prepared(inputs)
            sync(torch, plan.device)
            model_times.append(time.perf_counter() - started)
        preprocess_s = statistics.median(inline_times)
        prepare_s = statistics.median(prepare_times)
        device_s = max(statistics.median(model_times), 1e-9)
        times = []
        for _ in range(plan.repeats):
            sync(torch, plan.device)
            started = time.perf_counter()
            result = embedder.embed_pages(pages)
            sync(torch, plan.device)
            times.append(time.perf_counter() - started)
        embed_s = statistics.median(times)
        achieved_tflops = plan.flops_per_page * batch / device_s / 1e12
        row.update(
            pages_per_s=round(batch / embed_s, 3),
            embed_s=round(embed_s, 4),
            embed_s_all=[round(t, 4) for t in times],
            preprocess_s=round(preprocess_s, 4),
            prepare_s=round(prepare_s, 4),
            device_s=round(device_s, 4),
            device_pages_per_s=round(batch / device_s, 3),
            achieved_tflops=round(achieved_tflops, 3),
            mfu=round(achieved_tflops / plan.peak_tflops, 4),
            mfu_vs_matmul=round(achieved_tflops / plan.matmul_tflops, 4),
            rows_per_page=int(result[0].vectors.shape[0]),
            finite=bool(all(np.isfinite(p.vectors).all() for p in result)),
        )
        if plan.device == "cuda":
            row["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        else:
            row["peak_rss_growth_mib"] = round(max_rss_mib() - plan.rss_base_mib, 1)
    except Exception as exc:  # OOM or a device failure: record it, go on with the next size
        row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        if plan.device == "cuda":
            torch.cuda.empty_cache()
    return row


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument(
        "--layers",
        type=int,
        help=f"text layers, and ViT blocks unless --vision-layers (default: 28 text + 32 ViT on "
        f"CUDA, {CPU_DEFAULT_LAYERS} + {CPU_DEFAULT_LAYERS} on CPU)",
    )
    parser.add_argument(
        "--vision-layers",
        type=int,
        help=f"ViT blocks (default: as --layers, else 32 on CUDA, {CPU_DEFAULT_LAYERS} on CPU)",
    )
    parser.add_argument(
        "--batch-sizes",
        help=f"comma-separated (default: {CUDA_DEFAULT_BATCH_SIZES} on CUDA, "
        f"{CPU_DEFAULT_BATCH_SIZES} on CPU)",
    )
    parser.add_argument("--visual-tokens", type=int, default=768, help="max_num_visual_tokens")
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--repeats", type=int, help="timed runs per batch size (3 CUDA, 1 CPU)")
    parser.add_argument("--warmup", type=int, help="untimed runs per batch size (1 CUDA, 0 CPU)")
    parser.add_argument("--peak-tflops", type=float, help="peak FLOP/s for MFU, in TFLOP/s")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument(
        "--stream-pages",
        type=int,
        default=0,
        help="also embed this many pages in one call with the default token budget, pages "
        "prepared in line and on threads (0 = skip)",
    )
    parser.add_argument("--out", type=Path, required=True, help="write the report here as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    cuda = args.device == "cuda"
    bench_started = time.perf_counter()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if cuda and not torch.cuda.is_available():
        print("--device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    from pagesight.core.settings import VisualEmbedderOptions
    from pagesight.models.colqwen import ColQwen2Embedder
    from pagesight.models.testing.tiny_colqwen import (
        QWEN2_VL_2B_TEXT_CONFIG,
        QWEN2_VL_2B_VISION_CONFIG,
        build_random_colqwen2,
    )

    full_text = QWEN2_VL_2B_TEXT_CONFIG["num_hidden_layers"]
    full_vision = QWEN2_VL_2B_VISION_CONFIG["depth"]
    text_layers = args.layers or (full_text if cuda else CPU_DEFAULT_LAYERS)
    vision_layers = (
        args.vision_layers or args.layers or (full_vision if cuda else CPU_DEFAULT_LAYERS)
    )
    batch_sizes = [
        int(b)
        for b in (
            args.batch_sizes or (CUDA_DEFAULT_BATCH_SIZES if cuda else CPU_DEFAULT_BATCH_SIZES)
        ).split(",")
    ]
    dtype_name = args.dtype or ("bfloat16" if cuda else "float32")
    dtype = getattr(torch, dtype_name)
    repeats = args.repeats or (3 if cuda else 1)
    warmup = args.warmup if args.warmup is not None else (1 if cuda else 0)

    print(f"measuring {dtype_name} matmul on {args.device} ...", file=sys.stderr, flush=True)
    matmul_tflops = measure_matmul_tflops(torch, args.device, dtype)
    if args.peak_tflops:
        peak_tflops, peak_source = args.peak_tflops, "--peak-tflops"
    elif cuda:
        peak_tflops, peak_source = H200_BF16_DENSE_TFLOPS, "H200 dense bf16 spec (989.5 TFLOP/s)"
    else:
        peak_tflops, peak_source = matmul_tflops, "fp32 2048^3 matmul measured in this run"

    rss_base_mib = max_rss_mib()
    print(
        f"building ColQwen2 ({text_layers} text layers, {vision_layers} ViT blocks) ...",
        file=sys.stderr,
        flush=True,
    )
    started = time.perf_counter()
    model, processor = build_random_colqwen2(
        text_layers=text_layers,
        vision_layers=vision_layers,
        max_num_visual_tokens=args.visual_tokens,
        device=args.device,
        dtype=dtype,
    )
    build_s = time.perf_counter() - started
    weights_gib = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**30
    options = VisualEmbedderOptions.model_validate(
        {
            "model": "random-colqwen2-full-size",
            "device": args.device,
            "dtype": dtype_name,
            "max_num_visual_tokens": args.visual_tokens,
            "page_batch_tokens": 10**9,  # one forward pass per embed_pages call
        }
    )
    embedder = ColQwen2Embedder.from_loaded(model, processor, options)

    pages = synthetic_pages(max(batch_sizes))
    probe = processor.process_images(pages[:1])
    merge = processor.image_processor.merge_size
    grid = [int(n) // merge for n in probe["image_grid_thw"][0][1:]]
    visual_tokens = int((probe["input_ids"][0] == processor.image_token_id).sum())
    prompt_tokens = int(probe["attention_mask"][0].sum()) - visual_tokens
    flops = page_flops(model.config, visual_tokens, prompt_tokens)

    report: dict[str, Any] = {
        "device": args.device,
        "device_name": torch.cuda.get_device_name() if cuda else _cpu_name(),
        "dtype": dtype_name,
        "layers_text": text_layers,
        "layers_vision": vision_layers,
        "reduced": text_layers < full_text or vision_layers < full_vision,
        "page_size_px": list(PAGE_SIZE),
        "visual_tokens_per_page": visual_tokens,
        "prompt_tokens_per_page": prompt_tokens,
        "grid": grid,
        "flops_per_page": flops,
        "flops_formula": "see bench/bench_embed.py module docstring",
        "parameters": parameter_counts(model),
        "image_processor": type(processor.image_processor).__name__,
        "prepare_device": getattr(processor.image_processor, "device", None) or "cpu",
        "peak_tflops": round(peak_tflops, 3),
        "peak_source": peak_source,
        "matmul_tflops_measured": round(matmul_tflops, 3),
        "weights_gib": round(weights_gib, 3),
        "build_s": round(build_s, 1),
        "repeats": repeats,
        "warmup": warmup,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "versions": {
            "torch": torch.__version__,
            "transformers": _version("transformers"),
            "colpali_engine": _version("colpali-engine"),
        },
        "batches": [],
        "complete": False,
    }
    # The report is rewritten after every batch size, so a run cut short keeps what it measured.
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plan = BatchPlan(
        device=args.device,
        repeats=repeats,
        warmup=warmup,
        flops_per_page=flops["total"],
        peak_tflops=peak_tflops,
        matmul_tflops=matmul_tflops,
        rss_base_mib=rss_base_mib,
    )
    for batch in batch_sizes:
        print(f"batch {batch} ...", file=sys.stderr, flush=True)
        report["batches"].append(bench_batch(torch, embedder, processor, pages[:batch], plan))
        report["total_s"] = round(time.perf_counter() - bench_started, 1)
        row = report["batches"][-1]
        print(f"  {row.get('pages_per_s', row.get('error'))} pages/s", file=sys.stderr, flush=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.stream_pages:
        report["stream"] = bench_stream(torch, model, processor, options, args.stream_pages)
        print(f"stream: {report['stream']}", file=sys.stderr, flush=True)
    report["complete"] = True
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print_table(report)
    return 0


def bench_stream(
    torch: Any, model: Any, processor: Any, options: Any, count: int
) -> dict[str, Any]:
    """``count`` pages through one ``embed_pages`` call with the default token budget per
    forward pass, what a bulk job sees: pages prepared in line on the CPU, on threads with the
    next batch prepared while the model runs, and (with the torchvision-based processor on a
    GPU) the same with resizing and normalising on the GPU."""
    from pagesight.core.settings import VisualEmbedderOptions
    from pagesight.models.colqwen import ColQwen2Embedder, prepares_on_model_device

    default_budget = VisualEmbedderOptions.model_fields["page_batch_tokens"].default
    pages = synthetic_pages(count, seed=1)
    result: dict[str, Any] = {"pages": count, "page_batch_tokens": default_budget}
    variants = [("in_line", 1, "cpu"), ("threads", 0, "cpu")]
    if prepares_on_model_device("auto", processor, options.device):
        variants.append(("threads_on_device", 0, "model"))
    for label, workers, where in variants:
        embedder = ColQwen2Embedder.from_loaded(
            model,
            processor,
            options.model_copy(
                update={
                    "page_batch_tokens": default_budget,
                    "prepare_workers": workers,
                    "prepare_device": where,
                }
            ),
        )
        embedder.embed_pages(pages[: min(count, 16)])  # warm-up: threads and their processors
        sync(torch, options.device)
        started = time.perf_counter()
        embedder.embed_pages(pages)
        sync(torch, options.device)
        result[f"{label}_pages_per_s"] = round(count / (time.perf_counter() - started), 3)
        embedder.close()
    return result


def print_table(report: dict[str, Any]) -> None:
    memory_key = "peak_memory_gib" if report["device"] == "cuda" else "peak_rss_growth_mib"
    print(
        f"ColQwen2 {report['device']} {report['dtype']}: {report['layers_text']} text layers, "
        f"{report['layers_vision']} ViT blocks{' (reduced)' if report['reduced'] else ''}, "
        f"{report['visual_tokens_per_page']} visual tokens/page, "
        f"{report['flops_per_page']['total'] / 1e12:.3f} TFLOP/page, "
        f"peak {report['peak_tflops']} TFLOP/s ({report['peak_source']})"
    )
    print(
        f"{'batch':>5} {'pages/s':>9} {'prep s':>8} {'threads':>8} {'device s':>9} "
        f"{'TFLOP/s':>9} {'MFU':>7} "
        f"{memory_key:>20}"
    )
    for row in report["batches"]:
        if "error" in row:
            print(f"{row['batch_size']:>5} {row['error']}")
            continue
        print(
            f"{row['batch_size']:>5} {row['pages_per_s']:>9.3f} {row['preprocess_s']:>8.3f} "
            f"{row['prepare_s']:>8.3f} "
            f"{row['device_s']:>9.3f} {row['achieved_tflops']:>9.3f} {row['mfu']:>7.1%} "
            f"{row[memory_key]:>20}"
        )


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    raise SystemExit(main())
