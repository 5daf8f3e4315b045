"""The companion client: registry HTTP client, local store, lockfile, runtime loader, and the
`provisioning` command. Pure Python; never imports Django."""
