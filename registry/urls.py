"""The composition root: the only place where `registry` mentions `builds`."""

from django.contrib import admin
from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from builds import apis as build_apis
from registry import apis_write, views

api = "api/v1/"

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path(f"{api}extensions/", build_apis.PublishApi.as_view(), name="extension-publish"),
    path(f"{api}builds/", build_apis.SourceBuildApi.as_view(), name="build-create"),
    path(f"{api}builds/<str:build_id>/", build_apis.BuildDetailApi.as_view(), name="build-detail"),
    path(
        f"{api}extensions/<str:name>/versions/<str:version>/yank",
        apis_write.YankApi.as_view(),
        name="version-yank",
    ),
    path(f"{api}extensions/<str:name>/owners/", apis_write.OwnersApi.as_view(), name="extension-owners"),
    path(f"{api}tokens/", apis_write.TokensApi.as_view(), name="tokens"),
    path(f"{api}openapi.json", SpectacularAPIView.as_view(), name="openapi"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="openapi"), name="api-docs"),
    path("admin/", admin.site.urls),
]

handler400 = "registry.views.handler400"
handler403 = "registry.views.handler403"
handler404 = "registry.views.handler404"
handler500 = "registry.views.handler500"
