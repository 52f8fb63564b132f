"""The collector service behind ``queueops collect``: scheduled collection into the store, the
lake export, Prometheus metrics and alerts. See :mod:`queueops.service.app`."""

from queueops.service.app import Service, run_service

__all__ = ["Service", "run_service"]
