"""bbwd's benchmarks: speed benchmarks (``bench.speed``) and quality studies over ``bbwd eval`` runs
(``bench.quality``), run as modules from the repository root: ``python -m bench.speed.ot --quick``.

Shared code: ``bench.common`` (every script), ``bench.verdicts`` (the verdict studies) and ``bench._reference``
(the padded teacher pass ``bench.speed.teacher_cpu`` times). A script imports these, never another script.
"""
