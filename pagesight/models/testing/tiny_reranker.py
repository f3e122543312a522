"""A randomly initialised cross-encoder built offline, for tests and benchmarks of the reranker.

Nothing here downloads anything. :func:`build_tiny_cross_encoder` writes a ~200 kB checkpoint
(weights, config, tokenizer) with ``save_pretrained``, so it loads through the same
``AutoTokenizer`` / ``AutoModelForSequenceClassification.from_pretrained`` code path that
:class:`pagesight.models.reranker.CrossEncoderReranker` uses for real weights; only the scores are
meaningless.

Why XLM-RoBERTa: the default reranker, ``BAAI/bge-reranker-v2-m3``, is an
``XLMRobertaForSequenceClassification`` with one logit and a SentencePiece (Unigram) tokenizer
that returns no ``token_type_ids`` and pairs texts as ``<s> A </s></s> B </s>``; the tiny model
has the same architecture, head and pairing, at toy widths (hidden 32, 2 layers, 2 heads).

How the pieces are made:

* Tokenizer: a Unigram model trained with ``tokenizers`` on the fixed text below (so it is
  deterministic), with XLM-R's pre-tokenizer (whitespace split + ``▁`` metaspace) and its special
  tokens at XLM-R's ids (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2, ``<unk>`` 3), wrapped as
  ``XLMRobertaTokenizer``. ``model_max_length`` is 512, the positions the model has.
* Model: ``XLMRobertaForSequenceClassification`` with ``num_labels=1`` under a fixed seed, without
  disturbing the global RNG. ``initializer_range`` is raised from 0.02 to 0.5: at transformers'
  default a model this narrow gives every pair nearly the same logit (differences ~1e-4), so a
  test could not tell a ranking from ties.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pagesight.models.hf import quiet_transformers

#: XLM-R's special tokens, in XLM-R's id order (``<mask>`` follows directly here, not at the end).
XLMR_SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")

#: Widths of the tiny model.
TINY_CONFIG: dict[str, Any] = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 514,  # 512 tokens; RoBERTa positions start after padding_idx (1)
    "type_vocab_size": 1,
    "initializer_range": 0.5,
    "num_labels": 1,
}
#: Longest input the tiny tokenizer allows (the positions the model has).
TINY_MAX_LENGTH = 512

#: Text the tiny tokenizer is trained on: a few hundred words of the questions and passages the
#: answer pipeline reranks (report prose, table captions, figure notes), so queries and passages
#: tokenize into word pieces rather than single characters.
_CORPUS = (
    "What was the total revenue in 2023 and how did it change from the previous year?",
    "Total revenue rose to 4.2 billion dollars in 2023, up 12 percent from 2022, driven by "
    "higher sales in the cloud segment and a stronger services business in Europe.",
    "Which table shows quarterly operating income, net sales and gross margin by segment?",
    "Table 4 reports net sales, gross margin and operating income for each quarter and segment.",
    "The chart compares survey results for the United States and Germany across age groups.",
    "Figure 3: cash flow from operations, capital expenditures and free cash flow.",
    "How many employees did the company have at the end of the fiscal year 2022?",
    "At the end of fiscal year 2022 the company employed 18,400 people in 31 countries.",
    "Summary of the annual report: risk factors, outlook, dividends and share repurchases.",
    "The board proposes a dividend of 1.10 euros per share and a new buyback programme.",
    "Risk factors include currency exchange rates, interest rates, supply chain disruptions, "
    "cyber security incidents, regulation and competition from new entrants.",
    "Management expects revenue growth between five and seven percent next year, with margins "
    "broadly stable as energy and freight costs return to normal levels.",
    "The invoice lists the customer name, the billing address, the order number, the due date, "
    "the amount before tax, the value added tax and the total amount payable.",
    "Section 2.3 describes the safety procedure for maintenance of the pump: switch off the "
    "power, close both valves, release the pressure and wait ten minutes before opening.",
    "The contract may be terminated by either party with three months written notice; the "
    "supplier remains liable for defects reported within the warranty period of two years.",
    "Patients in the treatment group reported fewer side effects than the control group, and "
    "the difference was statistically significant at the five percent level.",
    "The map shows average rainfall per month in the northern and southern regions; the dry "
    "season lasts from June to September.",
    "Who signed the agreement, on which date, and where is the registered office of the seller?",
    "The agreement was signed in Paris on 14 March 2021 by the chief executive officer and the "
    "chief financial officer on behalf of the company.",
    "Where can I find the wiring diagram for the control unit and the list of spare parts?",
    "Appendix B contains the wiring diagram, the list of spare parts with their part numbers "
    "and the recommended torque for every screw.",
    "0123456789 % $ € , . ; : ( ) - / the of and to in for on with by from is was are were",
)


def build_tokenizer() -> Any:
    """A small Unigram tokenizer as an ``XLMRobertaTokenizer`` with XLM-R's special tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import XLMRobertaTokenizer

    unigram = Tokenizer(models.Unigram())
    # The pre-tokenizer XLMRobertaTokenizer installs, so the pieces are trained on what it sees.
    unigram.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always"),
        ]
    )
    trainer = trainers.UnigramTrainer(
        vocab_size=1000,
        special_tokens=list(XLMR_SPECIAL_TOKENS),
        unk_token="<unk>",  # noqa: S106  # a tokenizer special token, not a password
        show_progress=False,
    )
    unigram.train_from_iterator(list(_CORPUS) * 4, trainer)
    vocab = [
        (str(piece), float(score))
        for piece, score in json.loads(unigram.to_str())["model"]["vocab"]
    ]
    if [piece for piece, _ in vocab[: len(XLMR_SPECIAL_TOKENS)]] != list(XLMR_SPECIAL_TOKENS):
        raise RuntimeError("tokenizers did not put the special tokens first")
    return XLMRobertaTokenizer(vocab=vocab, model_max_length=TINY_MAX_LENGTH)


def build_tiny_cross_encoder(path: Path, seed: int = 0) -> Path:
    """Write a tiny random XLM-R cross-encoder (one logit) to ``path`` and return it.

    Loads with ``AutoTokenizer.from_pretrained(path)`` and
    ``AutoModelForSequenceClassification.from_pretrained(path)``; about a second to build.
    """
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaForSequenceClassification

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    config = XLMRobertaConfig(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **TINY_CONFIG,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = XLMRobertaForSequenceClassification(config).eval()
    with quiet_transformers():
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
    return path


def main() -> None:
    """``python -m pagesight.models.testing.tiny_reranker DIR``: write the tiny cross-encoder, e.g.
    to try the reranker end to end without real weights (point ``RerankerOptions.model`` at DIR)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("target", type=Path)
    args = parser.parse_args()
    print(build_tiny_cross_encoder(args.target))


if __name__ == "__main__":
    main()
