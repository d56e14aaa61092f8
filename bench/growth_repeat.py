"""Growth with less noise than one pair: the small-table and the large-table run in pairs.

    .venv/bin/python bench/growth_repeat.py [--handoffs 10000] [--rows 1000000] [--pairs 3]

Each run: `--handoffs` handoffs delivered by 4 dispatchers (batch API) with `--rows` (or 10,000) delivered
rows preloaded, vacuumed and checkpointed first. Prints each run and the ratio of each large run to the
small run beside it; the pairs are taken and judged by bench/pairs.py (alternating, loaded pairs left
out, a collapsed small-table run refuses the figure), its judgement on the last line.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e import throughput  # noqa: E402
from harness import Bench  # noqa: E402
from pairs import Pair, measure_pairs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--handoffs", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    bench = Bench("growth", RECEIVER_SUPPORTS_BATCH="1", HANDOFF_CLAIM_BATCH="50").setup()
    bench.start_receiver()
    runs: dict[tuple[int, str], dict] = {}

    def side(name: str, preload: int):
        def one(n: int) -> float:
            runs[(n, name)] = throughput(bench, args.handoffs, 4, f"g{name[0]}{n}", preload=preload)
            return runs[(n, name)]["per_second"]

        return one

    def report(pair: Pair) -> None:
        small, large = runs[(pair.index, "small")], runs[(pair.index, "large")]
        print(
            f"pair {pair.index + 1}: {small['per_second']:,.0f}/s with 10,000 delivered rows, "
            f"{large['per_second']:,.0f}/s with {args.rows:,}: ratio {pair.ratio:.2f}"
            f"; checked: {small['check']['ok'] and large['check']['ok']}"
            f"{'; left out: loaded' if pair.loaded else ''}",
            flush=True,
        )

    try:
        figure = measure_pairs(
            "growth_small",
            side("small", 10_000),
            side("large", args.rows),
            pairs=args.pairs,
            on_pair=report,
        )
    finally:
        bench.stop()
    print(f"judged: {figure.describe()}", flush=True)


if __name__ == "__main__":
    main()
