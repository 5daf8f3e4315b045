"""The extension format, in pure Python (no Django).

Shared by the registry's build pipeline and the `provisioning` client, so that a package built on a
laptop and one built by the registry are the same bytes, and both sides resolve the same way.
"""
