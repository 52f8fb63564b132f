"""queueops: observability and operations for database tables used as queues."""

__version__ = "0.1.0"
