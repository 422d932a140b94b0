"""What an answer says, below ``baselines``, ``eval`` and ``calibration``: normalised text, ROUGE-L and
Porter's stems (``text``) and equivalence of math final answers (``mathcheck``)."""
