"""Put Fashion-MNIST into the data folder (`make data`).

    python scripts/data.py [--root data]

vitlib.data.fashion_mnist does the work: the files already there, else Debian's copy (apt-get
install dataset-fashion-mnist), else torchvision's download. With none of them it exits with
the message that names both fixes.
"""

import argparse
import sys

from vitlib.data import fashion_mnist


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root", default="data", help="the data folder (default: data)"
    )
    args = parser.parse_args()
    try:
        print(fashion_mnist(args.root))
    except RuntimeError as error:
        sys.exit(f"make data: {error}")


if __name__ == "__main__":
    main()
