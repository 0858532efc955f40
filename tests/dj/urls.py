from django.contrib import admin
from django.urls import include, path

from tests.dj import views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("upload/", views.upload),
    path("files/", include("blobledger.django.urls")),
]
