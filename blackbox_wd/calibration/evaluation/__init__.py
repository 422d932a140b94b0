"""Evaluation: scores and verdicts against labels, the one home of the numbers ``bbwd eval``'s summary.md,
``bbwd report``'s page, ``bbwd calibrate`` and bench/ show (the doors write them out).

``metrics`` (AUROC with bootstrap CIs, paired differences, AUPRC, PRR, correlations, sentence AUC-PR, grouped
AUROC), ``reliability`` (the one binning of a probability: its reliability bins and its ECE), ``labels`` (the label
vocabulary, and the rows that carry a label), ``methods`` (summary.md's per-method tables), ``sentences`` (its
sentence level), ``claim_level`` (its claim level), ``replay`` (``-k auto`` replayed) and ``verdicts`` (the page's
risks, histogram and verdicts against labels).
"""
