"""A run: the stages after sampling, and the Detector that wires them.

``detector`` (``Detector``, built once by ``Detector.from_settings`` from ``build``'s parts), ``stages`` (teacher
pass -> scores -> verdict), ``texts`` (a verdict that reads the texts alone, without the teacher pass), ``groups``
(the stages over a group of records), ``rounds`` (``-k auto``'s loop), ``result`` (``Result`` and its one
serialization), ``inputs`` (JSONL input records) and ``runlog`` (the resumable JSONL output and ``Resume``, the one
resume driver).
"""
