import os
import sys

# `python -m streamlint` puts the current directory first on sys.path: in a linted checkout, that would let
# the repository's own modules (one named like a dependency, a planted *.dist-info entry point) be
# imported. streamlint is never imported from the current directory except when run from its own source.
if sys.path and not sys.flags.safe_path:
    _first = os.path.abspath(sys.path[0] or os.curdir)
    if _first == os.getcwd() and os.path.dirname(os.path.dirname(os.path.abspath(__file__))) != _first:
        del sys.path[0]

from streamlint.cli import run  # noqa: E402

if __name__ == "__main__":
    run()
