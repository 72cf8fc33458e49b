"""A sweep and its runs: parameters, the interleaved schedule, one run, the progress display."""
