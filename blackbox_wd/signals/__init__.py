"""Signals beside the W2 scores, read from the same samples: the baselines and the claims.

``baselines/`` (LNE, LS, ES, ER, DSE, lm-polygraph's peers), ``answers/`` (short-answer text and math checks),
``lexical`` (SelfCheck-Unigram), ``claims`` (a claim's score in the samples) and ``decompose`` (``--claims
target``: the target lists an answer's claims); ``names``, what tables and pages call lm-polygraph's estimators.
"""
