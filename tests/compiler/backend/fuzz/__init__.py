"""A differential fuzzer of the backend: seeded random programs, compiled vs eager.

- `generator.py`: `generate(seed) -> Program` (inputs, statements, outputs, later calls), built by
  trial: each candidate statement (from the op table in `ops.py`) is run eagerly on the first
  call's inputs and kept only if eager accepts it, so every program is valid eager code.
- `values.py`: input tensors of a spec for one call (dtypes, special values, layouts).
- `compare.py`: compiled vs eager with dtype-aware tolerances, NaN positions equal, and the rule
  that separates rounding from wrong results (distance to a float64 reference).
- `runner.py`: the targets (C++, Triton under the interpreter, our frontend) and `run_program`.
- `reducer.py`: delta reduction of a failing program to a minimal one (printed as source).

The CI test is tests/compiler/backend/test_fuzz_backend.py; scripts/fuzz_backend.py runs
thousands in worker processes (crash and hang isolation) and writes scripts/results/fuzz_*.
"""
