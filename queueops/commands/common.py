"""Helpers shared by the command modules: loading config with a clean error, printing JSON."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from queueops import config as config_mod
from queueops import secrets


def add_config_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="PATH",
                   help="config file (default: $QUEUEOPS_CONFIG, else ./queueops.toml)")


def load_config(args: argparse.Namespace) -> config_mod.Config:
    """Load the config or exit 2 with every problem printed (file, field, value)."""
    try:
        return config_mod.load(getattr(args, "config", None))
    except config_mod.ConfigError as exc:
        print(secrets.mask(str(exc)), file=sys.stderr)
        raise SystemExit(2) from None


def print_json(obj: Any) -> None:
    print(json.dumps(obj, default=str, separators=(",", ":")), flush=True)


def fail(message: str, code: int = 1) -> int:
    print(f"queueops: {secrets.mask(message)}", file=sys.stderr)
    return code
