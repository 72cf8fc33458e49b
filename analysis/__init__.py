"""netio-trace: the Python driver (run, trace, report, doctor) and the analysis."""
