"""netio-trace's driver: the command line (cli), the sweep and its runs (run/), and the
system plumbing they stand on (system/: namespaces, cgroups, processes, signals, state)."""
