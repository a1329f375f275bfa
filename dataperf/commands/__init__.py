"""The command line: one module a command, its click options and the rendering of its records."""
