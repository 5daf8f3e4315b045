"""Reading a published version's configuration interface again from its stored package, for
versions published before the registry read interfaces (or after its parser changed):
`python manage.py readinterfaces`. The package is fetched into a work directory under
REGISTRY_TMP_DIR, inspected, extracted and read in the build sandbox exactly as a publish reads
it (`extensions.sandboxed_steps.package_interface`), and the result stored on the version."""

from __future__ import annotations

import uuid
from typing import Any

from builds import workspace
from extensions import sandbox, sandboxed_steps
from extensions.interface import interface_from_dict
from registry import services as catalog
from registry import storage
from registry.limits import archive_limits, interface_limits, sandbox_limits
from registry.models import Version


def version_interface_read(*, version: Version) -> dict[str, Any]:
    """Read and store ``version``'s interface; returns it. Raises the sandbox's errors
    (`SandboxLimitExceeded` and the author's `ExtensionError`s: the package's fault;
    `SandboxCrash`: ours) and `RegistryError` when storage is down; nothing is stored then."""
    workdir = workspace.tmp_dir() / f"interface-{version.pk}-{uuid.uuid4().hex}"
    workdir.mkdir(mode=0o700)
    try:
        package = workdir / "package.tar.gz"
        with package.open("wb") as target:
            storage.download_to(version.storage_key, target)
        limits = interface_limits()
        kwargs = {
            "package": str(package),
            "workdir": str(workdir),
            "limits": sandboxed_steps.limits_to_dict(archive_limits()),
            "interface_limits": limits.to_dict(),
        }
        result = sandbox.run_sandboxed("extensions.sandboxed_steps.package_interface", kwargs, limits=sandbox_limits())
        interface = interface_from_dict(result.value, limits=limits)
    finally:
        workspace.remove_tree(workdir)
    catalog.version_interface_set(version_id=version.pk, interface=interface)
    return interface
