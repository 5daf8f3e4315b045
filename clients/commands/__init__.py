"""Subcommands of `provisioning`, one module per area; each exposes ``register(cli)``."""
