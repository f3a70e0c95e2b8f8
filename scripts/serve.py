"""Serve the built site on this machine's loopback address (`make serve`), for reading it in a
browser: http://127.0.0.1:8000/.

Opened from disk (file://), every page reads, but browsers refuse what the live demos of pages
8c and 8d load (an ES module and WebAssembly): over http they run. Standard library only.

    python scripts/serve.py [--port 8000] [--site _build/html]    # --port 0: any free port
"""

import argparse
import sys
import threading
from pathlib import Path

from browser import serve  # the server the site tests use (standard library only)

SITE = Path(__file__).resolve().parents[1] / "_build" / "html"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--site", type=Path, default=SITE)
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        sys.exit(f"make serve: no site in {args.site}: build it first with make book")
    try:
        httpd = serve(args.site, args.port)
    except OSError as error:
        sys.exit(
            f"make serve: port {args.port} cannot be used ({error.strerror}): choose "
            "another, as in make serve PORT=8001"
        )
    url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    print(f"The book is at {url} (Ctrl-C stops the server)", flush=True)
    try:
        threading.Event().wait()  # the server runs in its own thread
    except KeyboardInterrupt:
        httpd.shutdown()
        print("stopped")


if __name__ == "__main__":
    main()
