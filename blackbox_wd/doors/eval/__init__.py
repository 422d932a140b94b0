"""``bbwd eval``: ``main`` (the command) -> ``run`` (scoring and labelling) -> ``outputs`` (summary.md and the plots)
with ``summary`` (summary.md's text; its numbers are ``calibration.evaluation``'s).

``data`` (loaders, prompt protocols), ``labels`` (correctness labels), ``labeller`` (the LLM that labels answers,
``--judge``) and ``claim_level`` (summary.md's claim AUROC, grouped by answer)."""
