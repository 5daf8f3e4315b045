"""The JSON API's views (DRF), one module per area; registry/urls.py routes to them.

- `base`: what every view shares (envelope, actor, throttles, query parameters, negotiation);
- `shapes`: how things are shown, and the OpenAPI description of those shapes;
- `catalog`: search, extensions, versions, dependents, what is provided by kind (reads);
- `downloads`: the package; `schema`: the JSON Schema of extension.toml;
- `resolve`: resolution, install plans and index documents;
- `yank`, `owners`, `tokens`: owner and account actions (writes).

Publishing and builds are `builds.apis` (publishing *is* a build)."""
