"""Write a large synthetic trace (default 100,000 events) for scripts/bench_tui.py.

    python scripts/make_big_trace.py [OUT] [--events N]
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tracetorch.tui.synthetic import write_synthetic_trace  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default="/tmp/tracetui_big/trace_big.log")
    ap.add_argument("--events", type=int, default=100_000, help="about how many records")
    args = ap.parse_args(argv)
    # one model pattern (3 compiles) is ~40 records; the rest is fusion-decision padding
    scale = max(1, args.events // 2000)
    pad = max(0, args.events - scale * 40)
    path = write_synthetic_trace(args.out, scale=scale, pad_events=pad, fail=True)
    from tracetorch.logs.trace_reader import read_trace
    print(f"wrote {path}: {len(read_trace(path).raw_events)} records, "
          f"{path.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
