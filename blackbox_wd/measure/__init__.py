"""The measure: token states to W2 distances to scores, no model.

``transport`` (exact pairwise W2, W2 to each sample, per-token plan costs), ``wd`` (AvgWD, EigenWD, AnswerWD,
sentence scores, unit states) and ``sentences`` (an answer's sentences as offsets, tokens to sentences).
"""
