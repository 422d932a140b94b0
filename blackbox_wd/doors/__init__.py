"""The doors: each converts its input and output and runs the stages through a ``Detector``.

``cli`` (``bbwd``: parses and delegates), ``batch``, ``ray_engine`` and ``rejudge`` (``bbwd batch``), ``eval/``,
``serve/``, ``report/`` and ``calibrate`` (``bbwd calibrate``).
"""
