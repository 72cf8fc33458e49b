"""What the driver needs from the system: namespaces, cgroups, gated processes, signals,
privileges, where our binaries are, machine facts, and the state file for crash cleanup."""
