"""``bbwd eval``: ``main`` (the command) -> ``run`` (scoring and labelling) -> ``report`` (plots) with ``summary``
(summary.md).

``data`` (loaders, prompt protocols), ``labels`` (correctness labels), ``judge`` (the LLM judge) and
``claim_level`` (summary.md's claim AUROC, grouped by answer)."""
