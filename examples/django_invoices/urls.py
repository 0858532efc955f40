from django.contrib import admin
from django.urls import include, path

from examples.django_invoices.invoices import views

urlpatterns = [
    path("", views.index, name="index"),
    path("invoices/<int:pk>/pdf", views.download, name="download"),
    path("admin/", admin.site.urls),
    path("files/", include("blobledger.django.urls")),
]
