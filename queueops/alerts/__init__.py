"""Alerts: threshold rules evaluated on every cycle, state kept in the store, one notification
per queue and cycle listing its transitions, root causes first.

:mod:`~queueops.alerts.rules` turns config into rules (pure), :mod:`~queueops.alerts.evaluate`
is the state machine (pure), :mod:`~queueops.alerts.notify` delivers (webhook, log line) and
:mod:`~queueops.alerts.manager` ties them to the store for the service.
"""
