"""The view that reads files on stores that sign no URL (local disk), and the public view of
the storages made ``public`` (by name, unsigned):

    urlpatterns = [..., path("files/", include("blobledger.django.urls"))]
"""

from __future__ import annotations

from django.urls import path

from blobledger.django import views

app_name = "blobledger"
urlpatterns = [
    path("public/<str:storage>/<path:name>", views.serve_public, name="public"),
    path("<path:name>", views.serve, name="file"),
]
