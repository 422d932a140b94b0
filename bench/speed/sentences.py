"""A prompt's transport time with the sentence scores of its judged answer vs with AnswerWD alone.

Random 128-d token clouds (``bench.common.token_clouds``: K samples of ~M tokens, m_i ~ U[0.5M, 1.5M]) and a judged
answer, the first cloud, whose text has exactly as many words as the cloud has points, split in S sentences
(each word one token, its character span from the text). Each round draws a fresh prompt and times, in
alternating order, the stages of its transport:

    pairwise   D = transport.pairwise_w2(samples)                            (both)
    before     AnswerWD from transport.w2_to_each(answer, samples)           (the reference)
    plans      AnswerWD from transport.token_costs_to_each(answer, samples)  (the same solves, token costs kept)
    sentences  sentences.score_sentences: spaCy split, tokens to sentences, scores (after a warm-up call)

Reference prompt = pairwise + before; with sentences = pairwise + plans + sentences. The table gives medians
(ms) and the median over rounds of each round's ratio; the goal of #23 is at most 1.20. spaCy's first call
in a process (import and pipeline) is reported apart, as it is paid once per process.

    python -m bench.speed.sentences              # K=20, M=180, S=8, 7 rounds
    python -m bench.speed.sentences --quick      # smoke run, a few seconds
"""

from __future__ import annotations

import argparse
import os
import platform
import re
from functools import partial
from itertools import pairwise

import numpy as np

from bench.common import table, timed, token_clouds
from blackbox_wd.measure.sentences import score_sentences
from blackbox_wd.measure.transport import pairwise_w2, token_costs_to_each, w2_from_token_costs, w2_to_each
from blackbox_wd.measure.wd import answer_wd

WORDS = (
    "the",
    "river",
    "was",
    "founded",
    "in",
    "1913",
    "by",
    "Smith",
    "of",
    "Louis",
    "whose",
    "family",
    "lived",
    "near",
    "Zürich",
    "and",
    "later",
    "moved",
    "to",
    "Canberra",
    "where",
    "he",
    "taught",
    "law",
)


def answer_text(n_words: int, n_sentences: int, rng: np.random.Generator) -> tuple[str, np.ndarray]:
    """A text of ``n_words`` words in ``n_sentences`` sentences, and each word's (start, end), its space before it."""
    cuts = np.linspace(0, n_words, n_sentences + 1).round().astype(int)
    words = rng.choice(WORDS, size=n_words)
    sentences = [" ".join(words[a:b]).capitalize() + "." for a, b in pairwise(cuts) if b > a]
    text = " ".join(sentences)
    offsets = np.array([m.span() for m in re.finditer(r"\s*\S+", text)])
    assert len(offsets) == n_words
    return text, offsets


def plans(costs: np.ndarray) -> tuple[np.ndarray, float]:
    """The token costs of the plans and the AnswerWD they give."""
    return costs, answer_wd(w2_from_token_costs(costs))


def main() -> None:
    """Time the stages over fresh prompts and print one Markdown table and the ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="K=5, M=40, S=3, 9 rounds")
    ap.add_argument("-k", type=int, default=20)
    ap.add_argument("-m", type=int, default=180, help="mean tokens per response and answer")
    ap.add_argument("-s", type=int, default=8, help="sentences of the answer")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    k, m, s, rounds = (5, 40, 3, 9) if args.quick else (args.k, args.m, args.s, args.rounds)
    rng = np.random.default_rng(0)
    load = os.getloadavg()
    first_ms, _ = timed(lambda: score_sentences("Warm up. The pipeline loads.", np.array([[0, 4]]), np.zeros((1, 1))))
    times: dict[str, list[float]] = {name: [] for name in ("pairwise", "before", "plans", "sentences")}
    worst = 0.0
    for r in range(rounds):
        answer, *samples = token_clouds(rng, k + 1, m, equal=False)
        text, offsets = answer_text(len(answer), s, rng)
        got: dict[str, tuple[float, object]] = {}
        stages = {
            "pairwise": partial(pairwise_w2, samples),
            "before": lambda answer=answer, samples=samples: answer_wd(w2_to_each(answer, samples)),
            "plans": lambda answer=answer, samples=samples: plans(token_costs_to_each(answer, samples)),
        }
        for name in list(stages) if r % 2 == 0 else list(stages)[::-1]:
            got[name] = timed(stages[name])
        costs, after = got["plans"][1]
        got["sentences"] = timed(partial(score_sentences, text, offsets, costs))
        assert len(got["sentences"][1]) == s
        worst = max(worst, abs(after - got["before"][1]) / got["before"][1])
        for name in times:
            times[name].append(got[name][0])
    t = {name: np.array(v) for name, v in times.items()}
    reference = t["pairwise"] + t["before"]
    with_sentences = t["pairwise"] + t["plans"] + t["sentences"]
    ratio = float(np.median(with_sentences / reference))
    print(
        f"numpy {np.__version__}, python {platform.python_version()}, {len(os.sched_getaffinity(0))} CPUs available, "
        f"load average {load[0]:.2f} at the start"
    )
    print(
        f"K={k} samples, ~{m} tokens each and in the answer, {s} sentences, dim 128, {rounds} rounds; spaCy's first "
        f"call in the process (import, pipeline): {first_ms:.0f} ms, not counted below"
    )
    print(
        table(
            ["stage", "median ms", "share of the prompt with sentences (median)"],
            [
                ["pairwise D", f"{np.median(t['pairwise']):.1f}", f"{np.median(t['pairwise'] / with_sentences):.1%}"],
                ["AnswerWD, w2_to_each (before)", f"{np.median(t['before']):.1f}", "-"],
                [
                    "AnswerWD, token_costs_to_each",
                    f"{np.median(t['plans']):.1f}",
                    f"{np.median(t['plans'] / with_sentences):.1%}",
                ],
                [
                    "sentence step",
                    f"{np.median(t['sentences']):.2f}",
                    f"{np.median(t['sentences'] / with_sentences):.1%}",
                ],
                ["prompt before (pairwise + w2_to_each)", f"{np.median(reference):.1f}", "-"],
                ["prompt with sentences", f"{np.median(with_sentences):.1f}", "100%"],
            ],
        )
    )
    print(f"token costs / w2_to_each (median of rounds): {np.median(t['plans'] / t['before']):.3f}")
    print(f"prompt transport with sentences / before (median of rounds): {ratio:.3f} (goal: at most 1.20)")
    print(f"max relative deviation of AnswerWD (token costs vs w2_to_each): {worst:.2e}")


if __name__ == "__main__":
    main()
