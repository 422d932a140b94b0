"""``bbwd serve``: an OpenAI-compatible chat endpoint that answers every call and scores it.

protocol.py (the wire format: checked fields, errors, the ``bbwd`` object), upstream.py (the API
target, forwarded unchanged), local.py (a local model answering, white-box), batcher.py (teacher
passes shared across requests), prometheus.py (the /metrics counters), service.py (one request's way through the
pipeline), app.py (the FastAPI/uvicorn edge), http.py (its h11 protocol: 431 for a huge head).
Needs the ``serve`` extra (fastapi, uvicorn, prometheus-client).
"""
