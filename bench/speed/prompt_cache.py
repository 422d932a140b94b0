"""llama.cpp's prompt cache and white-box determinism: what restoring saved earlier turns keeps of the speed.

A prompt's samples must not depend on what the process drew before it, yet llama.cpp's prompt cache reads a
prompt from whatever start another prompt left in its slot (computed in another batch, so rounded otherwise).
The white-box sampler (``clients/llamacpp.py``) reads a prompt's earlier turns (all but its last message) once,
saves them, and restores them into the slot before each of the prompt's requests; a prompt without earlier
turns is read afresh. This script draws the same prompts in three modes, in the stages ``-k auto`` draws (3,
then 2 more), on the embedded model:

- ``on``: llama.cpp's cache as it comes (``cache_prompt`` on, any slot): the speed reference;
- ``off``: every prompt read afresh (``cache_prompt`` off), the previous release;
- ``restore`` (shipped): earlier turns restored, the rest read afresh.

For each: the **time** of every prompt's stages in order, modes alternating over ``--repeats`` rounds (median,
and the median of the paired ratios to ``on``, all in this run on this machine); **determinism**: each prompt
drawn first in the run and drawn last, after the others, must give the same samples.

Three workloads: short factual questions (the chat template is all they share); the same after about 600
tokens of few-shot exemplars as earlier turns (user and assistant turns, as ``bbwd eval``'s few-shot protocol
builds them); and the same exemplars inside the one user message (no earlier turns: nothing to restore).

    python -m bench.speed.prompt_cache [--repeats 3] [--prompts 16] [--shots 12] [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from bench.common import table
from blackbox_wd.clients.llamacpp import LlamaCppSampler
from blackbox_wd.records import SamplingParams
from blackbox_wd.teachers.embedded import ensure_gguf
from blackbox_wd.teachers.hf import load_teacher

QUESTIONS = [
    "What is the lightest element?",
    "Who wrote Hamlet?",
    "What is the capital of Japan?",
    "How many legs does a spider have?",
    "What gas do plants absorb?",
    "Who painted the Mona Lisa?",
    "What is the largest planet?",
    "What is the boiling point of water in Celsius?",
    "Who discovered penicillin?",
    "What is the chemical symbol of gold?",
    "What is the longest river in Africa?",
    "Who was the first person on the moon?",
    "What is the smallest prime number?",
    "What language is spoken in Brazil?",
    "What is the hardest natural substance?",
    "How many continents are there?",
]
SHOTS = [
    ("What is the capital of Italy?", "Rome"),
    ("Who wrote Pride and Prejudice?", "Jane Austen"),
    ("What is the freezing point of water in Celsius?", "Zero degrees"),
    ("Which planet is known as the red planet?", "Mars"),
    ("What is the square root of 81?", "Nine"),
    ("Who developed the theory of relativity?", "Albert Einstein"),
    ("What is the main language of Mexico?", "Spanish"),
    ("What organ pumps blood through the body?", "The heart"),
    ("How many days are in a leap year?", "366"),
    ("What is the currency of the United Kingdom?", "The pound sterling"),
    ("What is the tallest mountain on Earth?", "Mount Everest"),
    ("Who composed the Fifth Symphony?", "Ludwig van Beethoven"),
]
STAGES = ((0, 3), (3, 2))  # -k auto's first two stages: samples 0-2, then 3-4


def few_shot(shots: int) -> str:
    """The first ``shots`` exemplars as one text (about 50 tokens each)."""
    return "".join(
        f"Question: {q}\nAnswer: {a}\nExplanation: {a} is the answer that reference works give for this question, "
        "as any encyclopedia, textbook or almanac of general knowledge states it, with the sources agreeing.\n\n"
        for q, a in SHOTS[:shots]
    )


def exemplars(text: str) -> list[dict[str, str]]:
    """Few-shot exemplars as user and assistant turns."""
    return [
        turn
        for block in text.strip().split("\n\n")
        for turn in (
            {"role": "user", "content": block.split("\nAnswer: ")[0] + "\nAnswer:"},
            {"role": "assistant", "content": block.split("\nAnswer: ")[1]},
        )
    ]


WORKLOADS = ("short questions", "few-shot, earlier turns", "few-shot, one message")
MODES = ("on", "off", "restore")


def prompts(workload: str, shots: int = len(SHOTS)) -> list[list[dict[str, str]]]:
    """The workload's chat messages (few-shot: after the first ``shots`` exemplars)."""
    text = few_shot(shots)
    if workload == "few-shot, earlier turns":
        return [[*exemplars(text), {"role": "user", "content": f"Question: {q}\nAnswer:"}] for q in QUESTIONS]
    prefix = text if workload == "few-shot, one message" else ""
    return [[{"role": "user", "content": f"{prefix}Question: {q}\nAnswer:"}] for q in QUESTIONS]


class ModeSampler(LlamaCppSampler):
    """The shipped sampler, or (``mode`` on / off) one that restores nothing and sends ``cache_prompt`` as said."""

    mode = "restore"

    def earlier_turns(self, messages, ids):
        return super().earlier_turns(messages, ids) if self.mode == "restore" else []

    def post(self, path, body):
        if path == "/completion" and self.mode == "on":
            body = {k: v for k, v in body.items() if k != "id_slot"} | {"cache_prompt": True}
        return super().post(path, body)


def draw(sampler: LlamaCppSampler, messages: list[dict[str, str]]) -> list[tuple[int, ...] | None]:
    """A prompt's samples over the stages."""
    out: list[tuple[int, ...] | None] = []
    for start, k in STAGES:
        params = SamplingParams(k, 1.0, 1.0, 8, 0, start)
        out += [s.token_ids for s in sampler.sample_many([(messages, k)], params)[0].samples]
    return out


def run(sampler: LlamaCppSampler, batch: list[list[dict[str, str]]]) -> tuple[float, list]:
    """Seconds to draw every prompt's stages in order, and the samples."""
    t0 = time.perf_counter()
    got = [draw(sampler, m) for m in batch]
    return time.perf_counter() - t0, got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=len(QUESTIONS))
    ap.add_argument("--shots", type=int, default=len(SHOTS), help="few-shot exemplars (~50 tokens each)")
    ap.add_argument("--quick", action="store_true", help="smoke: 2 prompts, 2 exemplars, 1 round")
    args = ap.parse_args()
    if args.quick:
        args.repeats, args.prompts, args.shots = 1, 2, 2
    teacher = load_teacher("smollm2-135m", "cpu", "float32", None, 16384)
    sampler = ModeSampler(teacher, ensure_gguf())
    rows = []
    for workload in WORKLOADS:
        batch = prompts(workload, args.shots)[: args.prompts]
        seconds: dict[str, list[float]] = {m: [] for m in MODES}
        same: dict[str, int] = {}
        for r in range(args.repeats):
            for mode in MODES[r % 3 :] + MODES[: r % 3]:
                sampler.mode = mode
                s, forward = run(sampler, batch)
                seconds[mode].append(s)
                if r == 0:  # each prompt first in the run (after the other modes'), then after all the others
                    _, backward = run(sampler, batch[::-1])
                    same[mode] = sum(a == b for a, b in zip(forward, backward[::-1], strict=True))
        for mode in MODES:
            ratios = [x / on for x, on in zip(seconds[mode], seconds["on"], strict=True)]
            print(f"{workload} {mode}: {seconds[mode]}", file=sys.stderr, flush=True)
            rows.append(
                [
                    workload,
                    mode + (" (shipped)" if mode == "restore" else ""),
                    f"{statistics.median(seconds[mode]):.2f}",
                    f"{same[mode]} of {len(batch)}",
                    f"{statistics.median(ratios):.2f}",
                ]
            )
    print(
        f"## llama.cpp prompt cache: {args.prompts} prompts, stages of 3 and 2 samples of 8 tokens, "
        f"median of {args.repeats} rotating rounds\n"
    )
    header = ["workload", "mode", "seconds", "prompts with equal samples in both orders", "/ on"]
    print(table(header, rows))


if __name__ == "__main__":
    main()
