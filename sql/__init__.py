"""SQL files of queueops, one folder per dialect; loaded by name through :mod:`queueops.sqlfiles`."""
