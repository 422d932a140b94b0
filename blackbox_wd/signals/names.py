"""What tables and pages call lm-polygraph's estimators (``baselines.peers``: ``PEERS``, then ``ANSWER_PEERS``), by
their fields in a result's ``baselines``: in full (``PEER_NAMES``: `bbwd eval`'s and `bbwd calibrate`'s tables, the
report's titles) and short (``PEER_SHORT_NAMES``: `bbwd score`'s line, the report's labels box). Plain strings, so
that a door imports them without the scoring's libraries."""

from __future__ import annotations

PEER_NAMES = {
    "lexsim_rouge1": "LexSim ROUGE-1",
    "lexsim_rougel": "LexSim ROUGE-L",
    "eigval_jaccard": "EigValLaplacian (Jaccard)",
    "degmat_jaccard": "DegMat (Jaccard)",
    "ecc_jaccard": "Eccentricity (Jaccard)",
    "answer_rougel": "answer's ROUGE-L to the samples",
    "answer_degmat": "answer's degree (Jaccard)",
    "answer_ecc": "answer's eccentricity (Jaccard)",
}
PEER_SHORT_NAMES = {
    "lexsim_rouge1": "LexSim-R1",
    "lexsim_rougel": "LexSim-RL",
    "eigval_jaccard": "EigVal",
    "degmat_jaccard": "DegMat",
    "ecc_jaccard": "Ecc",
    "answer_rougel": "answer RL",
    "answer_degmat": "answer DegMat",
    "answer_ecc": "answer Ecc",
}
