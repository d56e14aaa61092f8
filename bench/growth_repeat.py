"""Growth with less noise than one pair: the small-table and the large-table run alternated, twice.

    .venv/bin/python bench/growth_repeat.py [--handoffs 10000] [--rows 1000000] [--pairs 2]

Each run: `--handoffs` handoffs delivered by 4 dispatchers (batch API) with `--rows` (or 10,000) delivered
rows preloaded, vacuumed and checkpointed first. Prints each run and the ratio of each large run to the
small run just before it.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e import throughput  # noqa: E402
from harness import Bench  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handoffs", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=2)
    args = parser.parse_args()
    bench = Bench("growth", RECEIVER_SUPPORTS_BATCH="1", HANDOFF_CLAIM_BATCH="50").setup()
    bench.start_receiver()
    try:
        for pair in range(args.pairs):
            small = throughput(bench, args.handoffs, 4, f"gs{pair}", preload=10_000)
            large = throughput(bench, args.handoffs, 4, f"gl{pair}", preload=args.rows)
            ratio = large["per_second"] / small["per_second"]
            print(
                f"pair {pair + 1}: {small['per_second']:,.0f}/s with 10,000 delivered rows, "
                f"{large['per_second']:,.0f}/s with {args.rows:,}: ratio {ratio:.2f}"
                f"; checked: {small['check']['ok'] and large['check']['ok']}",
                flush=True,
            )
    finally:
        bench.stop()


if __name__ == "__main__":
    main()
