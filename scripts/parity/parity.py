"""Parity of the reference presets with the reference systems' own code (the oracles in
``../shared/oracles``), one subcommand per system, each in its own module:

    python scripts/parity/parity.py reme ...   # scripts/parity/parity_reme.py: ReMe's search_step
    python scripts/parity/parity.py oks ...    # scripts/parity/parity_oks.py: OKS's recall() with fts5
    python scripts/parity/parity.py bme ...    # scripts/parity/parity_bme.py: ST-BME's retrieve()

``python scripts/parity/parity.py SYSTEM --help`` lists each one's options. The oracles are development
tools (they need the upstream sources and scratch venvs, see ``../shared/oracles/README.md``);
CI does not run them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import parity_bme  # noqa: E402
import parity_oks  # noqa: E402
import parity_reme  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Parse the subcommand and run it."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="system", required=True)
    for mod in (parity_reme, parity_oks, parity_bme):
        mod.add_parser(sub)
    args = ap.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
