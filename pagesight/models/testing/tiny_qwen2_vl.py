"""A randomly initialised Qwen2-VL chat model built offline, for tests against a real VLM server.

Nothing here downloads anything. :func:`build_tiny_qwen2_vl` writes a ~1 MB checkpoint (weights,
config, generation config, tokenizer with a chat template, image processor) with
``save_pretrained``, so vLLM loads it exactly like a real Qwen2-VL checkpoint: a test of the
visual answer path talks to a real OpenAI-compatible server whose image handling (``image_url``
data URLs, Qwen2-VL's resizing and patching, the vision tower, M-RoPE positions), chat
templating, structured outputs and streaming are the production ones; only the words are noise.
It is the multimodal sibling of :mod:`pagesight.models.testing.tiny_qwen2` and reuses its tokenizer
and the Qwen2-VL config helpers of :mod:`pagesight.models.testing.tiny_colqwen`.

Why these choices:

* **Architecture.** ``Qwen2VLForConditionalGeneration``, the family of Qwen's VL answer models,
  at toy widths. Text as :mod:`pagesight.models.testing.tiny_qwen2`: hidden 64, 2 layers, 2
  attention heads of 64 / 2 = 32 (vLLM's CPU attention rejects head_dim 16), 2 KV heads; M-RoPE
  sections ``[4, 6, 6]`` (temporal, height, width) must sum to head_dim / 2 = 16. Vision as
  :mod:`pagesight.models.testing.tiny_colqwen`: 2 blocks of width 32 (2 heads), patch 14, spatial
  merge 2 (each merged token covers 28 x 28 pixels), merger output = text hidden size 64.
* **Tokenizer.** :func:`pagesight.models.testing.tiny_qwen2.build_tokenizer` (byte-level BPE over
  the answer prompt's words, ``<|im_end|>`` as EOS, ``<|endoftext|>`` as pad) plus Qwen2-VL's vision
  special tokens (``<|vision_start|>``, ``<|image_pad|>``, ...) added as special tokens; the
  config's ``image_token_id`` etc. are this tokenizer's ids, not Qwen's 151643+.
* **Chat template.** ChatML as in :mod:`pagesight.models.testing.tiny_qwen2`, but a content part
  of type ``image`` (what vLLM hands the template for an OpenAI ``image_url`` part) or ``image_url``
  renders as ``<|vision_start|><|image_pad|><|vision_end|>``, as in Qwen2-VL's own template;
  the server's multimodal processor expands the one ``<|image_pad|>`` into one token per merged
  patch. Text parts render as their text.
* **Image processor.** ``Qwen2VLImageProcessor`` (patch 14, merge 2) capped at
  :data:`TINY_MAX_VISUAL_TOKENS` merged patches per image (``max_pixels`` = 256 x 28 x 28): a
  600 x 800 page costs 236 prompt tokens (18 x 13 merged patches + 2 markers), so a prompt
  with a few pages stays within a small ``--max-model-len`` and a small KV cache.
* **Config compatibility.** The checkpoint is written by the main venv's transformers (5.3) and
  read by vLLM's (a later 5.x), from keyword arguments both understand; float32 is stored and
  the server is told ``--dtype float32`` (bf16 matmul is unusable on this CPU).
* **Weights.** Transformers' default init under a fixed seed, without disturbing the global RNG.
* **Serving needs torchvision.** vLLM 0.32's Qwen2-VL support imports transformers' torchvision
  image processor module, and ``Qwen2VLProcessor`` always loads the torchvision-only video
  processor, so the server's python must import torchvision; PyPI's build is CUDA-linked and
  fails next to CPU torch unless the ``torchvision::nms`` / ``qnms`` schemas are defined before
  it is imported (its ``_C.so`` cannot load, yet its fake-kernel registrations need the ops).
  Nothing in this module needs torchvision: the checkpoint is written without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pagesight.models.testing.tiny_colqwen import (
    QWEN_SPECIAL_TOKENS,
    TINY_TEXT_CONFIG,
    TINY_VISION_CONFIG,
    build_image_processor,
    qwen2vl_config,
)
from pagesight.models.testing.tiny_qwen2 import TINY_MAX_LENGTH, save_random_chat_model
from pagesight.models.testing.tiny_qwen2 import build_tokenizer as build_text_tokenizer

#: Text widths of the tiny VL model (module doc): head_dim 64 / 2 = 32, M-RoPE 4 + 6 + 6 = 16.
TINY_VL_TEXT_CONFIG: dict[str, Any] = {
    **TINY_TEXT_CONFIG,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "max_position_embeddings": TINY_MAX_LENGTH,
    "rope_scaling": {"type": "mrope", "mrope_section": [4, 6, 6]},
}
#: Most merged patches (prompt tokens) per image: ``max_pixels`` = 256 x 28 x 28.
TINY_MAX_VISUAL_TOKENS = 256

#: Qwen2-VL's placeholder for one image in a prompt (the server expands ``<|image_pad|>``).
IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"

#: ChatML (Qwen's format) accepting string or list-of-parts content; image parts become
#: :data:`IMAGE_PLACEHOLDER`.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] in ['image', 'image_url'] %}" + IMAGE_PLACEHOLDER + "{% endif %}"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tokenizer() -> Any:
    """The tiny Qwen2 chat tokenizer with Qwen2-VL's vision special tokens and the VL chat
    template (module doc)."""
    from tokenizers import AddedToken

    tokenizer = build_text_tokenizer()
    tokenizer.add_tokens(
        [AddedToken(t, special=True, normalized=False) for t in QWEN_SPECIAL_TOKENS]
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_qwen2_vl(path: Path, seed: int = 0) -> Path:
    """Write a tiny random Qwen2-VL chat model (module doc) to ``path`` and return it.

    Serves with ``vllm.entrypoints.openai.api_server --model path`` (module doc: torchvision);
    a fraction of a second to build once torch and transformers are imported.
    """
    from transformers import Qwen2VLForConditionalGeneration

    tokenizer = build_tokenizer()
    config = qwen2vl_config(tokenizer, TINY_VL_TEXT_CONFIG, TINY_VISION_CONFIG)
    processor = build_image_processor(TINY_MAX_VISUAL_TOKENS)
    return save_random_chat_model(
        path, Qwen2VLForConditionalGeneration, config, tokenizer, seed, processor
    )


def main() -> None:
    """``python -m pagesight.models.testing.tiny_qwen2_vl DIR``: write the tiny VL chat model, e.g.
    to serve it with vLLM (noise, not answers)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("target", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(build_tiny_qwen2_vl(args.target, seed=args.seed))


if __name__ == "__main__":
    main()
