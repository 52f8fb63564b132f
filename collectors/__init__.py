"""Collectors: each metric is one SQL file per dialect (``sql/<dialect>/<name>.sql``).

:mod:`collectors.registry` says which collectors exist, how often they run and which queue
kinds they apply to; :mod:`collectors.runner` runs one collector for all queues of a target in
a single round trip and turns the result into snapshot rows and a status row.
"""
