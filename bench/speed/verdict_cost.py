"""What the verdict adds to a prompt's time after the teacher pass, on recorded SAC3 and WikiBio rows.

Each prompt's samples and judged answer are forced once through the embedded teacher (SmolLM2-135M, fp32 on the
CPU); then, in rounds, its states are scored by ``scoring.score_states`` with the shipped API calibration (the
whole path after the teacher pass: OT, the baselines, the lexical signal, the verdict), and the verdict's own parts
are timed apart on the same result, in alternating order:

    members   baselines.compute_baselines (LS, ES, ER) + DSE (equal normalised answers)
              + lexical.unigram_surprise of the answer's sentences
    verdict   scoring.judge_result (the heads, the sentence head, the summary)

    ratio = (members + verdict) / (score_states - members - verdict)

i.e. the verdict's cost over the scores bbwd computed before it (D, AvgWD, EigenWD, AnswerWD, sentences). The
table gives per set the medians (ms) and the median over prompts of each prompt's median ratio; #32's goal is
at most 0.20. The teacher pass itself is shown for scale, and what a whole-model pass of the judged answer (for
``answer_nll``, which score does not run) would add to it over the same answer stopped at the layer (medians over
rounds).

    python -m bench.speed.verdict_cost                # 24 SAC3 prompts (K = 10), 8 WikiBio passages (K = 10), 5 rounds
    python -m bench.speed.verdict_cost --quick        # 4 + 2 prompts, 2 rounds
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from bench.common import command, data_dir, table
from blackbox_wd.calibration.model import PACKAGE_CALIBRATIONS, Calibration
from blackbox_wd.doors.eval.data import load
from blackbox_wd.doors.eval.run import recorded_draw
from blackbox_wd.run.detector import Detector
from blackbox_wd.run.stages import judge_result, score_states
from blackbox_wd.settings import Settings
from blackbox_wd.signals.baselines import compute_baselines, discrete_semantic_entropy, exact_match_entails
from blackbox_wd.signals.lexical import unigram_surprise


def ms(fn):  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e3, out


def measure(detector: Detector, path: Path, n: int, rounds: int) -> list[str]:
    """One row of the table: the set's medians and ratio over its first n prompts."""
    items = load(path, limit=n).items
    teacher, total, parts, ratios, answer = [], [], [], [], []
    wiring = (detector.settings, detector.reported_settings(), detector.calibration, detector.reference_bandwidth)
    for item in items:
        drawn = recorded_draw(item, detector.settings.k)
        drawn.samples.answer = drawn.answer
        t_teacher, (ps,) = ms(lambda: detector.teacher_pass([(item.messages, drawn.samples)]))  # noqa: B023
        teacher.append(t_teacher)
        # what answer_nll would add: the judged answer's whole-model pass over the same answer stopped at the layer
        pair = (detector.teacher.prompt_ids(item.messages), detector.teacher.response_ids(drawn.answer.text))
        full = [ms(lambda: detector.teacher.encode_ids([pair], logprobs=True))[0] for _ in range(rounds)]  # noqa: B023
        layer = [ms(lambda: detector.teacher.encode_ids([pair]))[0] for _ in range(rounds)]  # noqa: B023
        answer.append((float(np.median(full)) - float(np.median(layer))) / t_teacher)
        per = []
        for r in range(rounds):
            t_all, result = ms(lambda: score_states(ps, *wiring))  # noqa: B023
            texts = [s.text for s in result.sentences or []]

            def members() -> None:
                compute_baselines(result.responses, embeddings=[s.last for s in ps.states])  # noqa: B023
                discrete_semantic_entropy(result.responses, exact_match_entails)  # noqa: B023
                unigram_surprise(texts, result.responses, ps.samples.answer.text)  # noqa: B023

            order = [members, lambda: judge_result(result, detector.calibration)]  # noqa: B023
            spent = sum(ms(f)[0] for f in (order if r % 2 == 0 else order[::-1]))
            total.append(t_all)
            parts.append(spent)
            per.append(spent / max(t_all - spent, 1e-9))
        ratios.append(float(np.median(per)))
    return [
        path.stem,
        str(len(items)),
        f"{np.median(teacher):.0f}",
        f"{np.median(total):.1f}",
        f"{np.median(parts):.1f}",
        f"{np.median(ratios):.3f}",
        f"{np.median(answer):.3f}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: 4 + 2 prompts, 2 rounds")
    args = ap.parse_args()
    n_sac3, n_wiki, rounds = (4, 2, 2) if args.quick else (24, 8, 5)
    calibration = Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.api.json")
    detector = Detector.from_settings(Settings(k=10, device="cpu"), None, recorded=True, all_scores=True)
    detector = detector.with_calibration(calibration)
    rows = [
        measure(detector, data_dir() / "sac3_nq_open.jsonl", n_sac3, rounds),
        measure(detector, data_dir() / "wikibio_gpt3_dev.jsonl", n_wiki, rounds),
    ]
    print(
        f"command: {command()}   ({platform.machine()}, "
        f"{os.cpu_count()} cores, {rounds} rounds, K = 10, teacher smollm2-135m fp32 CPU)\n"
    )
    header = [
        "set",
        "prompts",
        "teacher pass ms",
        "after the pass ms",
        "verdict's part ms",
        "verdict / the rest",
        "answer_nll's pass / teacher pass (not run)",
    ]
    print(table(header, rows))


if __name__ == "__main__":
    main()
