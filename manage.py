#!/usr/bin/env python
"""Django's command-line utility, with configuration errors reported as one clear line."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "registry.settings")
    from django.core.exceptions import ImproperlyConfigured

    try:
        from django.conf import settings

        settings.INSTALLED_APPS  # noqa: B018 - load the settings now, to report a bad value cleanly
    except ImproperlyConfigured as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        sys.exit(2)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
