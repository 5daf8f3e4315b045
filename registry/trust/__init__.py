"""The signed index (SPEC 6.1): the registry as a TUF repository.

`repository` signs (init, the publish/yank hook, rotation, expiry), `targets` says what is signed,
`keys` keeps the keys, `integrity` checks that the signed metadata and the catalogue agree, and
`views` serves ``/tuf/metadata/`` and ``/tuf/targets/``."""
