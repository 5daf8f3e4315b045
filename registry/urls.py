"""The composition root: the only place where `registry` mentions `builds`."""

from django.contrib import admin
from django.urls import path
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerView

from builds import apis as build_apis
from builds import metrics as build_metrics
from builds import views as build_views
from builds import web_views as build_web_views
from registry import account_views, metrics, owner_views, views
from registry.apis import (
    catalog,
    downloads,
    interface,
    oci,
    owners,
    provenance,
    resolve,
    schema,
    tokens,
    trusted_publishers,
    yank,
)
from registry.trust import views as trust_views

api = "api/v1/"

urlpatterns = [
    # The web catalog (HTML).
    path("", views.home, name="catalog-home"),
    path("search", views.search, name="catalog-search"),
    path("extensions/<str:name>/", views.extension_page, name="catalog-extension"),
    path(
        "extensions/<str:name>/trusted-publishers/",
        account_views.trusted_publishers_page,
        name="catalog-trusted-publishers",
    ),
    # The owners' controls (POST; before the version page, whose <version> would take "owners").
    path("extensions/<str:name>/owners/", owner_views.owners_page, name="catalog-owners"),
    path("extensions/<str:name>/<str:version>/yank/", owner_views.yank_page, name="catalog-yank"),
    path("extensions/<str:name>/<str:version>/", views.version_page, name="catalog-version"),
    path("builds/<str:build_id>/", build_views.build_page, name="catalog-build"),
    path("builds/<str:build_id>/live", build_views.build_live, name="catalog-build-live"),
    path("healthz", views.healthz, name="healthz"),
    path("accounts/login/", account_views.ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", account_views.CatalogLogoutView.as_view(), name="logout"),
    # A signed-in user's pages: their account, tokens, and publishing from the browser.
    path("account/", build_web_views.account_page, name="account"),
    path("account/tokens/", account_views.tokens_page, name="account-tokens"),
    path("account/tokens/<str:token_id>/revoke/", account_views.token_revoke_page, name="account-token-revoke"),
    path("publish/", build_web_views.publish_page, name="catalog-publish"),
    # GET searches (registry.apis.catalog), POST publishes (builds.apis).
    path(f"{api}extensions/", build_apis.ExtensionsApi.as_view(), name="extension-publish"),
    path(f"{api}extensions/providers", catalog.ProvidersApi.as_view(), name="providers"),
    path(f"{api}extensions/taskservs", catalog.TaskservsApi.as_view(), name="taskservs"),
    path(f"{api}extensions/clusters", catalog.ClustersApi.as_view(), name="clusters"),
    path(f"{api}extensions/templates", catalog.TemplatesApi.as_view(), name="templates"),
    path(f"{api}extensions/<str:name>/", catalog.ExtensionDetailApi.as_view(), name="extension-detail"),
    path(f"{api}extensions/<str:name>/dependents/", catalog.DependentsApi.as_view(), name="extension-dependents"),
    path(
        f"{api}extensions/<str:name>/versions/<str:version>/", catalog.VersionDetailApi.as_view(), name="version-detail"
    ),
    path(
        f"{api}extensions/<str:name>/versions/<str:version>/download",
        downloads.DownloadApi.as_view(),
        name="version-download",
    ),
    path(
        f"{api}extensions/<str:name>/versions/<str:version>/interface",
        interface.VersionInterfaceApi.as_view(),
        name="version-interface",
    ),
    path(
        f"{api}extensions/<str:name>/versions/<str:version>/provenance",
        provenance.ProvenanceApi.as_view(),
        name="version-provenance",
    ),
    path(f"{api}builds/", build_apis.SourceBuildApi.as_view(), name="build-create"),
    path(f"{api}builds/<str:build_id>/", build_apis.BuildDetailApi.as_view(), name="build-detail"),
    path(
        f"{api}extensions/<str:name>/versions/<str:version>/yank",
        yank.YankApi.as_view(),
        name="version-yank",
    ),
    path(f"{api}extensions/<str:name>/owners/", owners.OwnersApi.as_view(), name="extension-owners"),
    path(f"{api}extensions/<str:name>/owners/<str:username>/", owners.OwnerApi.as_view(), name="extension-owner"),
    path(
        f"{api}extensions/<str:name>/trusted-publishers/",
        trusted_publishers.TrustedPublishersApi.as_view(),
        name="trusted-publishers",
    ),
    path(
        f"{api}extensions/<str:name>/trusted-publishers/<int:publisher_id>/",
        trusted_publishers.TrustedPublisherApi.as_view(),
        name="trusted-publisher",
    ),
    path(
        f"{api}trusted-publishing/exchange",
        trusted_publishers.TrustedPublishingExchangeApi.as_view(),
        name="trusted-publishing-exchange",
    ),
    path(f"{api}tokens/", tokens.TokensApi.as_view(), name="tokens"),
    path(f"{api}tokens/<int:token_id>/", tokens.TokenApi.as_view(), name="token"),
    # Keep this lookup after every other two-segment route under extensions/ (e.g. a future
    # extensions/taskservs/install): it matches any extensions/WORD/WORD.
    path(f"{api}index/<str:name>", resolve.index_document, name="index-document"),
    path(f"{api}resolve", resolve.ResolveApi.as_view(), name="resolve"),
    path(
        f"{api}extensions/<str:kinds>/install",
        resolve.InstallPlanApi.as_view(),
        name="install-plan",
    ),
    path(f"{api}extensions/<str:type>/<str:name>", catalog.ProvidedLookupApi.as_view(), name="extension-lookup"),
    path(f"{api}schema/extension.json", schema.ManifestSchemaApi.as_view(), name="manifest-schema"),
    path("metrics", metrics.metrics_view(extra=[build_metrics.BuildCollector()]), name="metrics"),
    # GET and HEAD only: OPTIONS would be DRF's metadata document, outside the envelope (a 405 in it);
    # on the docs page, rendered through its HTML template, which has none for it (a 500).
    path(f"{api}openapi.json", SpectacularJSONAPIView.as_view(http_method_names=["get", "head"]), name="openapi"),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(url_name="openapi", http_method_names=["get", "head"]),
        name="api-docs",
    ),
    path("admin/", admin.site.urls),
    # OCI distribution, pull side (SPEC 7): every path under /v2 (registry.apis.oci).
    *oci.urlpatterns,
    # The signed index (SPEC 6.1): static files nginx or a CDN can serve as well.
    path("tuf/metadata/<str:name>", trust_views.metadata, name="tuf-metadata"),
    path("tuf/targets/<path:path>", trust_views.target, name="tuf-target"),
]

handler400 = "registry.views.handler400"
handler403 = "registry.views.handler403"
handler404 = "registry.views.handler404"
handler500 = "registry.views.handler500"
