"""``bbwd report``: one self-contained HTML page of a scored log (``rows.py`` reads the rows, ``page.py`` writes it,
``labelling.py`` gives ``--suggest N``'s labelling mode its rows and storage key)."""
