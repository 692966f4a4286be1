"""Random programs around split reductions (tests/compiler/backend/fuzz/split_programs.py) at scale.

    python scripts/fuzz_split_reductions.py --programs 100 [--seed 0]

Each program is compiled for the Triton code generator (its interpreter on CPU tensors) and must
return eager's outputs exactly (its values are exact in float32). Prints one line per failing
program (its source and what differed) and a summary; exits 1 when any failed. CI runs a few seeds
(tests/compiler/backend/test_split_reduction_fuzz.py).
"""
import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--programs", type=int, default=50)
    p.add_argument("--seed", type=int, default=0, help="first seed")
    args = p.parse_args(argv)
    from tests.compiler.backend.fuzz.split_programs import check, generate
    failed = 0
    for seed in range(args.seed, args.seed + args.programs):
        program = generate(seed)
        why = check(program)
        if why:
            failed += 1
            sys.stdout.write(f"seed {seed}: {why}\n{program.source()}\n\n")
    sys.stdout.write(f"split-reduction programs, seeds {args.seed}..{args.seed + args.programs - 1}: "
                     f"{args.programs - failed} ok, {failed} failed\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
