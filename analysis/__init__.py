"""Analysis of the results: the contract's names, run records, statistics, attribution of
samples to copy categories, the summary table, and the file helpers every layer uses."""
