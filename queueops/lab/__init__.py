"""The lab: a real PostgreSQL the project runs itself, with one queue table per kind, a workload
of producers and consumers, and fault switches that make each failure happen for real."""
