"""The autopilot: per-queue policies that run (or propose) an action through the action layer.

Off by default: nothing happens without an ``[[autopilot]]`` policy whose ``mode`` is ``propose``
or ``act``, and a global kill switch (``queueops autopilot off``) stops every policy. See
docs/actions.md.
"""
