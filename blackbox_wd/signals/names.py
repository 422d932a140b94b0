"""The short names of lm-polygraph's estimators (``baselines.peers``: ``PEERS``, then ``ANSWER_PEERS``), by their
fields in a result's ``baselines``: `bbwd score`'s line, the report's labels box (in full, as every member:
``calibration.members.MEMBER_NAMES``). Plain strings, so that a door imports them without the scoring's libraries."""

from __future__ import annotations

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
