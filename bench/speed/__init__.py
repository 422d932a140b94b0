"""Speed benchmarks: each times a reference and the optimised path in the same run and prints the ratio."""
