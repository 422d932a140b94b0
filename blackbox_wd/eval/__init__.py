"""Evaluation helpers: data loaders, correctness labels, AUROC with bootstrap CIs, the report."""
