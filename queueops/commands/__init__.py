"""One module per ``queueops`` verb; each defines ``register(subparsers)``."""
