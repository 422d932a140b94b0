"""``bbwd eval``: ``main`` (the command) -> ``run`` (scoring and labelling) -> ``report`` (plots) with ``summary``
(summary.md).

``data`` (loaders, prompt protocols), ``labels`` (correctness labels), ``labeller`` (the LLM that labels answers,
``--judge``) and ``claim_level`` (summary.md's claim AUROC, grouped by answer)."""
