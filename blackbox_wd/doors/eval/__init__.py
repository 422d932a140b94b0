"""``bbwd eval``: ``main`` (the command) -> ``run`` (scoring and labelling) -> ``outputs`` (summary.md and the plots)
with ``summary`` (summary.md's text; its numbers are ``calibration.evaluation``'s).

``data`` (loaders, prompt protocols), ``labels`` (correctness labels), ``judge`` (the LLM judge) and
``claim_level`` (summary.md's claim AUROC, grouped by answer)."""
