"""``bbwd report``: one self-contained HTML page of a scored log (``rows.py`` reads the rows, ``page.py`` writes it)."""
