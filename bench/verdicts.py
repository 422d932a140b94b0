"""What the verdict studies share (``bench.quality.verdict``, ``adaptive``, ``transfer``, ``teachers``, ``labels``):
the rows of ``bbwd eval`` runs, their members, the bootstrap settings, WikiBio's sentences as a table, the text of
figures with their CIs, the recorded dev sets' models, and the measures of a verdict on a set (AUROC or Pearson, ECE,
FPR and TPR). A study imports from here, never from another study.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from blackbox_wd.calibration.combine import Table, table_from
from blackbox_wd.calibration.evaluation.labels import SEVERITY
from blackbox_wd.calibration.evaluation.reliability import expected_calibration_error
from blackbox_wd.calibration.labelled import row_label
from blackbox_wd.calibration.members import MEMBERS, member_value
from blackbox_wd.calibration.model import Calibration
from blackbox_wd.measure.wd import eigen_wd
from blackbox_wd.signals.answers.text import answer_disagreement
from blackbox_wd.signals.baselines.peers import PEERS, peer_scores

API_MEMBERS = tuple(m for m in MEMBERS if m not in ("lne", "dse"))  # what every API row of both sets has
N_BOOT, SEED = 1000, 0


def read_rows(folder: Path) -> list[dict[str, Any]]:
    """The scored rows of a run (errors dropped)."""
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("error") is None]


def reference_bandwidth(runs: list[list[dict[str, Any]]]) -> float:
    """Median over every prompt of the runs of its median positive D (a prompt without one is left out)."""
    medians = [float(np.median(d[d > 0])) for rows in runs for r in rows if ((d := np.asarray(r["D"])) > 0).any()]
    return float(np.median(medians))


def members_of(row: dict[str, Any], bandwidth: float) -> dict[str, float | None]:
    """The answer-level members of an eval row (``calibration.model.member_value``), EigenWD's fixed bandwidth
    ``bandwidth`` applied to the row's D."""
    out = {name: member_value(row, name) for name in MEMBERS}
    out["log_eigen_wd_fixed"] = math.log(eigen_wd(np.asarray(row["D"]), bandwidth=bandwidth))
    return out


def auroc_text(a: Any) -> str:
    """An ``auroc_with_ci`` result with its CI."""
    return f"{a.auroc:.3f} [{a.lo:.3f}, {a.hi:.3f}]"


def r_text(c: Any) -> str:
    """A ``correlation_with_ci`` result x100 with its CI."""
    return f"{100 * c.r:.2f} [{100 * c.lo:.2f}, {100 * c.hi:.2f}]"


def column(ms: list[dict[str, float | None]], name: str) -> np.ndarray:
    """One member over rows' members (NaN where a row has none)."""
    return np.array([np.nan if m[name] is None else m[name] for m in ms], dtype=float)


def both_sets(sac3: list[dict], wiki: list[dict], bandwidth: float) -> tuple[list, list, np.ndarray, np.ndarray]:
    """The members of every row of both sets, SAC3's 0/1 labels and WikiBio's human scores."""
    m_s = [members_of(r, bandwidth) for r in sac3]
    m_w = [members_of(r, bandwidth) for r in wiki]
    y_s = np.array([r["label"] for r in sac3], dtype=float)
    h_w = np.array([r["human_score"] for r in wiki], dtype=float)
    return m_s, m_w, y_s, h_w


def sentence_table(wiki: list[dict]) -> tuple[Table, np.ndarray, np.ndarray]:
    """WikiBio's labelled sentences as a table over the OT score and the lexical surprise (label: minor or major
    inaccurate), with each sentence's severity (0, 1, 2) and passage index."""
    score, unigram, severity, groups = [], [], [], []
    for r in wiki:
        for s, label in zip(r["sentences"], r["sentence_labels"], strict=True):
            score.append(np.nan if s["score"] is None else s["score"])
            unigram.append(np.nan if s["unigram"] is None else s["unigram"])
            severity.append(SEVERITY[label])
            groups.append(r["id"])
    sev = np.array(severity)
    passage = np.unique(groups, return_inverse=True)[1]
    t = table_from({"score": score, "unigram": unigram}, list((sev > 0).astype(float)), groups, ["wikibio"] * sev.size)
    return t, sev, passage


# The target model of each recorded dev set of ../shared/data: leave one model out takes all its sets out together
MODELS = {
    "gpt-3.5-turbo": ("sac3_nq_open", "gbu_factscore_gpt35", "gbu_popqa_gpt35"),
    "text-davinci-003": ("wikibio_gpt3_dev",),
    "Llama-3-70B-Instruct": ("gbu_factscore_llama3_70b", "gbu_popqa_llama3_70b"),
    "Llama-3.1-8B-Instruct": ("kk_llama31_8b_triviaqa", "kk_llama31_8b_sciq", "kk_llama31_8b_math"),
    "Mistral-7B-Instruct-v0.3": ("kk_mistral_7b_triviaqa", "kk_mistral_7b_sciq", "kk_mistral_7b_math"),
}


def labelled_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a results file with a label and no error, each with its label under ``y``."""
    rows = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row.get("error") is None and (y := row_label(row, "label", str(path))) is not None:
            rows.append({**row, "y": y})
    return rows


def metric(y: np.ndarray, score: np.ndarray) -> float:
    """AUROC for 0/1 labels, else Pearson x100."""
    if np.all((y == 0) | (y == 1)):
        return float(roc_auc_score(y, score))
    return float(100 * np.corrcoef(y, score)[0, 1])


def soft_ece(y: np.ndarray, p: np.ndarray) -> float:
    """ECE with a label h in (0, 1) as two rows weighted h and 1 - h."""
    soft = (y > 0) & (y < 1)
    yy = np.concatenate([np.where(soft, 1.0, y), np.zeros(int(soft.sum()))])
    ww = np.concatenate([np.where(soft, y, 1.0), 1.0 - y[soft]])
    pp = np.concatenate([p, p[soft]])
    return expected_calibration_error(yy, pp, w=ww)


def rates(y: np.ndarray, flag: np.ndarray) -> tuple[float, float]:
    """Weighted (FPR, TPR) of the flags, a label h counting h positive and 1 - h negative."""
    neg, pos = np.sum(1 - y), np.sum(y)
    return float(np.sum((1 - y) * flag) / neg), float(np.sum(y * flag) / pos)


def model_of(name: str) -> str:
    """The target model whose answers a recorded set holds (``MODELS``); a set not named there is a model of its own."""
    return next((model for model, sets in MODELS.items() if name in sets), name)


def question_of(row: dict[str, Any]) -> str:
    """A row's prompt as its model was asked it (the same question in two models' sets is one prompt)."""
    asked = row.get("question") or row.get("prompt")
    return " ".join(str(asked).split()).lower() if asked else f"{row.get('source')}:{row.get('id')}"


def with_members(row: dict[str, Any], strip: Sequence[str]) -> dict[str, Any]:
    """The row with ``answer_disagreement`` and the peers computed where a run from before them lacks them (from its
    judged ``answer`` and ``responses``, as ``score_states`` computes them), less the members ``strip``."""
    row = dict(row)
    if row.get("answer_disagreement") is None and row.get("answer") and row.get("responses"):
        row["answer_disagreement"] = answer_disagreement(row["answer"], row["responses"])
    if row.get(PEERS[0]) is None and len(row.get("responses") or ()) >= 2:
        row.update(peer_scores(row["responses"], row.get("answer") or None))
    for name in strip:
        row.pop(name, None)
    return row


def runs_of(root: Path) -> dict[str, dict[int, Path]]:
    """{set: {K: results.jsonl}} of the folders ``<set>-k<K>`` under ``root``."""
    out: dict[str, dict[int, Path]] = {}
    for d in sorted(root.iterdir()):
        m = re.fullmatch(r"(.+)-k(\d+)", d.name)
        if m and (d / "results.jsonl").is_file():
            out.setdefault(m.group(1), {})[int(m.group(2))] = d / "results.jsonl"
    return out


def judge(cal: Calibration, rows: Sequence[dict[str, Any]], k: int) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """(p, flag, verdict) of each row under the calibration's heads for ``k`` samples."""
    verdicts = [cal.verdict(r, k=k) for r in rows]
    return np.array([v.p for v in verdicts]), np.array([v.flag for v in verdicts], dtype=float), verdicts


def training_files(
    runs: dict[str, dict[int, Path]],
    sets: Sequence[str],
    ks: Sequence[int] | None,
    unseen: set[str],
    out: Path,
    strip: Sequence[str],
) -> list[Path]:
    """The runs of ``sets`` (at ``ks``; None: every K) written under ``out`` without the rows whose question is in
    ``unseen`` (grouped by prompt: a question the left-out model answered is never fitted on), each row
    ``with_members``, without its claims' labels: the answer verdict measured here reads no claim head, and the
    claims of the bios left after a model's entities are taken out are too few to fit one."""
    files = []
    for name in sets:
        for k, path in runs[name].items():
            if ks is not None and k not in ks:
                continue
            folder = out / f"{name}-k{k}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "settings.json").write_bytes((path.parent / "settings.json").read_bytes())
            with (folder / "results.jsonl").open("w") as f:
                for line in path.read_text().splitlines():
                    row = json.loads(line)
                    if question_of(row) not in unseen:
                        f.write(json.dumps(with_members(row, (*strip, "claim_labels"))) + "\n")
            files.append(folder / "results.jsonl")
    return files
