"""The composition root: the only place where `registry` mentions `builds`."""

from django.contrib import admin
from django.urls import path

from registry import views

urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
]
