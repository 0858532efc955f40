"""The view that reads files on stores that sign no URL (local disk):

    urlpatterns = [..., path("files/", include("blobledger.django.urls"))]
"""

from __future__ import annotations

from django.urls import path

from blobledger.django import views

app_name = "blobledger"
urlpatterns = [path("<path:name>", views.serve, name="file")]
