"""dataperf: measurement-first tuning of training input pipelines."""

__version__ = "0.1.0"
