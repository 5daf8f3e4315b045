"""`python manage.py createtoken USERNAME --scope 'publish:*' [--create-user]`: print a new token."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from registry import services
from registry.errors import RegistryError
from registry.tokens import DEFAULT_SCOPES


class Command(BaseCommand):
    help = "Create an API token for a user and print it (shown once). For scripts and first set-up."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--scope",
            action="append",
            dest="scopes",
            metavar="SCOPE",
            help="publish:NAME, yank:NAME, owners:NAME, with * for every name, or tokens (managing "
            f"tokens) (repeatable; default {' '.join(DEFAULT_SCOPES)})",
        )
        parser.add_argument("--create-user", action="store_true", help="create the user if it does not exist")
        parser.add_argument("--name", default="createtoken", help="a label for the token")
        parser.add_argument("--expires-in-days", type=int, default=None, help="expiry (default: never)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            secret = services.user_create_token_for(
                username=options["username"],
                scopes=options["scopes"] or list(DEFAULT_SCOPES),
                create_user=options["create_user"],
                name=options["name"],
                days=options["expires_in_days"],
            )
        except RegistryError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(secret)
