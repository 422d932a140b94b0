"""Serve the embedded SmolLM2 GGUF with llama.cpp (xllamacpp) on 127.0.0.1 until interrupted.

    python -m scripts.serve_embedded [--parallel 4] [--threads 1] [--port 0]

Prints the base URL; then, e.g.:
    bbwd score --target smollm2-135m --base-url <URL> --teacher gemma3-270m "..."
"""

from __future__ import annotations

import argparse
import time

from bench.common import LlamaCppServer
from blackbox_wd.teachers.embedded import ensure_gguf


def main() -> None:
    """Start the server and keep it up."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--port", type=int, default=0, help="0: any free port (a run resumes only on the same endpoint)")
    args = ap.parse_args()
    with LlamaCppServer(ensure_gguf(), n_parallel=args.parallel, n_threads=args.threads, port=args.port) as server:
        print(server.base_url, flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
