"""bbwd's benchmarks: speed benchmarks (``bench.speed``) and quality studies over ``bbwd eval`` runs
(``bench.quality``), run as modules from the repository root: ``python -m bench.speed.ot --quick``.

Shared code: ``bench.common`` (every script) and ``bench.verdicts`` (the verdict studies). A script imports these,
never another script.
"""
