"""Record lm-polygraph's own values of its model-free estimators on real recorded samples, for the peers' tests
(tests/signals/test_peers.py).

    python -m venv --system-site-packages /tmp/lmp && /tmp/lmp/bin/pip install lm-polygraph==0.7.0
    /tmp/lmp/bin/python -m scripts.record_polygraph ../shared/data     # writes fixtures/polygraph_peers.json

lm-polygraph is installed beside bbwd, never a dependency of it. The texts are the recorded samples of the first 24
questions of SAC3's NQ-open set (gpt-3.5-turbo, Apache-2.0, intuit/sac3) and of the first 2 passages of WikiBio's
GPT-3 set (10 of their 20 samples; CC BY-SA 3.0, SelfCheckGPT), with a few edge cases (equal answers, answers with
no word in common, an empty answer). For each, the fixture holds lm-polygraph's values of LexicalSimilarity
(ROUGE-1 and ROUGE-L), EigValLaplacian, DegMat and Eccentricity over its Jaccard score, each computed by the
library's estimator class on ``{"sample_texts": [texts]}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "fixtures" / "polygraph_peers.json"
EDGE_CASES = [
    ["Canberra", "Canberra", "Canberra"],
    ["Paris is the capital.", "Lyon, maybe", "It is 42"],
    ["", "Sydney", "Canberra is the capital of Australia", "canberra"],
]


def estimators() -> dict[str, object]:
    """The estimators, by the key bbwd gives the same score (``baselines.peers.PEERS``)."""
    from lm_polygraph.estimators import DegMat, Eccentricity, EigValLaplacian, LexicalSimilarity

    return {
        "lexsim_rouge1": LexicalSimilarity("rouge1"),
        "lexsim_rougel": LexicalSimilarity("rougeL"),
        "eigval_jaccard": EigValLaplacian("Jaccard_score"),
        "degmat_jaccard": DegMat("Jaccard_score"),
        "ecc_jaccard": Eccentricity("Jaccard_score"),
    }


def sample_sets(data: Path) -> list[tuple[str, list[str]]]:
    """(where, texts) of each record the fixture holds."""
    out = []
    with (data / "sac3_nq_open.jsonl").open() as f:
        for i, line in zip(range(24), f, strict=False):
            out.append((f"sac3_nq_open line {i + 1}", json.loads(line)["samples"]))
    with (data / "wikibio_gpt3_dev.jsonl").open() as f:
        for i, line in zip(range(2), f, strict=False):
            out.append((f"wikibio_gpt3_dev line {i + 1}, samples 1-10", json.loads(line)["samples"][:10]))
    out += [(f"edge case {i + 1}", texts) for i, texts in enumerate(EDGE_CASES)]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, help="the folder of sac3_nq_open.jsonl and wikibio_gpt3_dev.jsonl")
    ap.add_argument("-o", "--output", type=Path, default=OUT)
    args = ap.parse_args(argv)
    ests = estimators()
    records = []
    for where, texts in sample_sets(args.data):
        stats = {"sample_texts": [texts]}
        values = {key: float(est(stats)[0]) for key, est in ests.items()}  # type: ignore[operator]
        records.append({"from": where, "sample_texts": texts, "lm_polygraph": values})
    body = {
        "lm_polygraph": version("lm-polygraph"),
        "rouge_score": version("rouge-score"),
        "estimators": {key: str(est) for key, est in ests.items()},
        "recorded_by": "python -m scripts.record_polygraph (lm-polygraph installed beside bbwd)",
        "records": records,
    }
    args.output.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n")
    print(f"{len(records)} records -> {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
