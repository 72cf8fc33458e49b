"""netio-trace agent: the long-running mode that serves OpenMetrics (docs/agent.md)."""
