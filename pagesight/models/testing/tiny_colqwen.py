"""Randomly initialised ColQwen2 models built offline, for tests and benchmarks.

Nothing here downloads anything. :func:`build_tiny_colqwen2` writes a ~1 MB checkpoint (weights,
config, tokenizer, image processor) that loads through the real ``ColQwen2.from_pretrained`` and
the processor loader that :class:`pagesight.models.colqwen.ColQwen2Embedder` uses, so tests exercise
the same code path as real weights. :func:`build_random_colqwen2` builds the full-size ColQwen2
architecture (Qwen2-VL-2B widths) in memory, optionally with fewer layers, for throughput
benchmarks: speed does not depend on weight values, and saving 2.2 B parameters would cost ~9 GB.

How the pieces are made:

* Tokenizer: a byte-level BPE trained with ``tokenizers`` on a few fixed sentences (so it is
  deterministic), wrapped as ``Qwen2Tokenizer`` (merges passed as tuples) with Qwen's special
  tokens, ``<|endoftext|>`` as pad token and left padding. Its ids are small, so the model
  config's ``image_token_id`` etc. are set to this tokenizer's ids, not Qwen's 151643+.
* Image processor: ``Qwen2VLImageProcessor`` (patch 14, merge 2), a small ``max_pixels``.
* Model: ``ColQwen2(Qwen2VLConfig(...))`` under a fixed seed. The pad token's embedding row and
  the projection bias are made non-zero: left at zero (transformers' init), padded rows come out
  as 0/0 = NaN after ColQwen2's L2 normalisation (real checkpoints have neither zero).
* Saving: transformers 5.3's ``save_pretrained`` writes ColQwen2's regex key mapping back into
  the key names literally (``model\\.layers.0...``), which ``from_pretrained`` then cannot map,
  silently re-initialising the language model. The weights are therefore written with
  safetensors under the key names that real ColQwen2 checkpoints use (``model.layers...``,
  ``model.embed_tokens``, ``model.norm``, ``visual...``, ``custom_text_proj``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pagesight.models.colqwen import make_colqwen2_processor, set_max_visual_tokens
from pagesight.models.testing.tiny_qwen2 import train_byte_level_bpe

if TYPE_CHECKING:
    import torch

#: Qwen2-VL's special tokens in Qwen's own id order (151643...).
QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)

#: Text the tiny BPE is trained on: colpali-engine's prompt words and typical query words, so
#: prompts and queries tokenize into a realistic handful of tokens each.
_BPE_CORPUS = (
    "user\nDescribe the image.",
    "What was the total revenue in 2023 and how did it change from the previous year?",
    "Which table shows quarterly operating income, net sales and gross margin by segment?",
    "The chart compares survey results for the United States and Germany across age groups.",
    "Figure 3: cash flow from operations, capital expenditures and free cash flow.",
    "How many employees did the company have at the end of the fiscal year 2022?",
    "Summary of the annual report: risk factors, outlook, dividends and share repurchases.",
    "0123456789 % $ , . ; : ( ) - the of and to in for on with by from",
)

#: Widths of the tiny model: text hidden 64 (4 heads of 16, 2 KV heads; mrope sections sum to
#: head_dim / 2 = 8), 2 layers; vision 2 blocks of 32 (2 heads), patch 14, merge 2.
TINY_TEXT_CONFIG: dict[str, Any] = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1_000_000.0,
    "max_position_embeddings": 32768,
    "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
    "hidden_act": "silu",
}
TINY_VISION_CONFIG: dict[str, Any] = {
    "depth": 2,
    "embed_dim": 32,
    "hidden_size": 64,  # merger output = text hidden size
    "num_heads": 2,
    "mlp_ratio": 2,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "in_channels": 3,
    "hidden_act": "quick_gelu",
}
#: Small enough for fast tests: an A4 page becomes 6 × 9 = 54 merged patches.
TINY_MAX_VISUAL_TOKENS = 64

#: Qwen2-VL-2B (the base of vidore/colqwen2-v1.0): Qwen2-1.5B text widths, 32-block ViT.
QWEN2_VL_2B_TEXT_CONFIG: dict[str, Any] = {
    "vocab_size": 151936,
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1_000_000.0,
    "max_position_embeddings": 32768,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "hidden_act": "silu",
}
QWEN2_VL_2B_VISION_CONFIG: dict[str, Any] = {
    "depth": 32,
    "embed_dim": 1280,
    "hidden_size": 1536,
    "num_heads": 16,
    "mlp_ratio": 4,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "in_channels": 3,
    "hidden_act": "quick_gelu",
}


def build_tokenizer() -> Any:
    """A small byte-level BPE as a ``Qwen2Tokenizer`` with Qwen's special tokens."""
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer

    vocab, merges = train_byte_level_bpe(_BPE_CORPUS, QWEN_SPECIAL_TOKENS, vocab_size=512)
    tokenizer = Qwen2Tokenizer(
        vocab=vocab, merges=merges, padding_side="left", model_max_length=32768
    )
    tokenizer.add_tokens(
        [AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL_TOKENS]
    )
    return tokenizer


def build_image_processor(max_num_visual_tokens: int, *, fast: bool = False) -> Any:
    """Qwen2-VL's image processor (patch 14, merge 2) capped at ``max_num_visual_tokens``;
    ``fast``: the torchvision-based one, which ``AutoImageProcessor`` picks when torchvision
    imports (so a GPU deployment with torchvision preprocesses with it)."""
    kwargs: dict[str, Any] = {
        "min_pixels": 56 * 56,
        "max_pixels": max_num_visual_tokens * 28 * 28,
        "patch_size": 14,
        "merge_size": 2,
        "temporal_patch_size": 2,
    }
    if fast:
        from transformers.models.qwen2_vl.image_processing_qwen2_vl_fast import (
            Qwen2VLImageProcessorFast,
        )

        return Qwen2VLImageProcessorFast(**kwargs)
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

    return Qwen2VLImageProcessor(**kwargs)


def torchvision_works() -> bool:
    """Whether torchvision imports (PyPI's CUDA build next to CPU torch fails with a
    RuntimeError, not an ImportError)."""
    try:
        import torchvision  # noqa: F401  # imported only to see whether it imports
    except (ImportError, RuntimeError):
        return False
    return True


def qwen2vl_config(
    tokenizer: Any, text: dict[str, Any], vision: dict[str, Any], *, dtype: str = "float32"
) -> Any:
    """A ``Qwen2VLConfig`` whose special-token ids are ``tokenizer``'s."""
    from transformers.models.qwen2_vl import Qwen2VLConfig

    def token_id(token: str) -> int:
        return int(tokenizer.convert_tokens_to_ids(token))

    pad = token_id("<|endoftext|>")
    text_config = {
        "vocab_size": len(tokenizer),
        **text,
        "bos_token_id": pad,
        "eos_token_id": token_id("<|im_end|>"),
        "pad_token_id": pad,
    }
    return Qwen2VLConfig(
        text_config=text_config,
        vision_config=dict(vision),
        image_token_id=token_id("<|image_pad|>"),
        video_token_id=token_id("<|video_pad|>"),
        vision_start_token_id=token_id("<|vision_start|>"),
        vision_end_token_id=token_id("<|vision_end|>"),
        dtype=dtype,
    )


def _random_colqwen2(config: Any, seed: int) -> Any:
    """``ColQwen2(config)`` drawn under ``seed`` (without disturbing the global RNG), with a
    non-zero pad-token embedding and projection bias (see module doc)."""
    import torch
    from colpali_engine.models import ColQwen2

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = ColQwen2(config)
        with torch.no_grad():
            pad_id = config.text_config.pad_token_id
            embed = model.language_model.embed_tokens.weight
            embed[pad_id].normal_(0.0, config.text_config.initializer_range)
            model.custom_text_proj.bias.normal_(0.0, 0.02)
    return model.eval()


def build_tiny_colqwen2(target_dir: Path, *, seed: int = 0) -> Path:
    """Write a tiny random ColQwen2 checkpoint to ``target_dir`` and return it.

    Loads with ``ColQwen2.from_pretrained(target_dir)`` and
    :func:`pagesight.models.colqwen.load_colqwen2_processor`; ~1 MB, a few seconds to build.
    """
    from safetensors.torch import save_file

    target_dir = Path(target_dir)
    target_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    config = qwen2vl_config(tokenizer, TINY_TEXT_CONFIG, TINY_VISION_CONFIG)
    model = _random_colqwen2(config, seed)
    weights = {_checkpoint_key(name): t.contiguous() for name, t in model.state_dict().items()}
    save_file(weights, str(target_dir / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(target_dir)
    tokenizer.save_pretrained(target_dir)
    build_image_processor(TINY_MAX_VISUAL_TOKENS).save_pretrained(target_dir)
    return target_dir


def build_random_colqwen2(
    *,
    text_layers: int | None = None,
    vision_layers: int | None = None,
    max_num_visual_tokens: int = 768,
    device: str = "cpu",
    dtype: torch.dtype | None = None,
    seed: int = 0,
) -> tuple[Any, Any]:
    """The full-size ColQwen2 architecture with random weights, in memory: ``(model, processor)``.

    Qwen2-VL-2B widths (text hidden 1536, 12 heads / 2 KV heads, MLP 8960, vocab 151936; ViT
    1280 wide, 16 heads) with all 28 text layers and 32 vision blocks unless ``text_layers`` /
    ``vision_layers`` say fewer. The weights are created directly on ``device`` in ``dtype``
    (default float32), never written to disk. The processor uses the tiny BPE tokenizer, whose
    prompt is about as long as Qwen's, and the fast (torchvision) image processor where
    torchvision works, as a loaded checkpoint would.
    """
    import torch

    dtype = dtype or torch.float32
    tokenizer = build_tokenizer()
    text = dict(QWEN2_VL_2B_TEXT_CONFIG)
    vision = dict(QWEN2_VL_2B_VISION_CONFIG)
    if text_layers is not None:
        text["num_hidden_layers"] = text_layers
    if vision_layers is not None:
        vision["depth"] = vision_layers
    config = qwen2vl_config(tokenizer, text, vision, dtype=str(dtype).removeprefix("torch."))
    config.text_config.vocab_size = QWEN2_VL_2B_TEXT_CONFIG["vocab_size"]
    previous_dtype = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype)
        with torch.device(device):
            model = _random_colqwen2(config, seed)
    finally:
        torch.set_default_dtype(previous_dtype)
    image_processor = build_image_processor(max_num_visual_tokens, fast=torchvision_works())
    processor = make_colqwen2_processor(image_processor, tokenizer)
    set_max_visual_tokens(processor, max_num_visual_tokens)
    return model, processor


def _checkpoint_key(name: str) -> str:
    """State-dict name → the name real ColQwen2 checkpoints store (``language_model.`` was
    ``model.`` before transformers 5; ColQwen2's loader maps it back)."""
    prefix = "language_model."
    return "model." + name.removeprefix(prefix) if name.startswith(prefix) else name


def main() -> None:
    """``python -m pagesight.models.testing.tiny_colqwen DIR``: write the tiny model, e.g. to try
    the visual route end to end without real weights (``PAGESIGHT_VISUAL__MODEL=DIR``)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("target", type=Path)
    args = parser.parse_args()
    print(build_tiny_colqwen2(args.target))


if __name__ == "__main__":
    main()
