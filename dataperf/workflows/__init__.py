"""One `run()` a command: measurements put together into the records a command prints. No click, no printing."""
