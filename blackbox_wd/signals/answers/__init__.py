"""What an answer says, below ``baselines``, ``eval`` and ``calibration``: normalised text, ROUGE-L
(``text``) and equivalence of math final answers (``mathcheck``)."""
