"""placement: worker/PS placement of distributed ML training jobs over a cluster topology."""

__version__ = "0.1.0"
