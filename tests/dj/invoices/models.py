"""The test project's models: invoices with a PDF on the ledger, owned by a customer (for
cascades), and a note with an optional scan (a second field on the same row)."""

from __future__ import annotations

from django.core.files.storage import FileSystemStorage
from django.db import models

from tests.dj.settings import ROOT

MEDIA = ROOT / "media"


class Customer(models.Model):
    name: models.CharField[str, str] = models.CharField(max_length=100)


class Invoice(models.Model):
    number: models.CharField[str, str] = models.CharField(max_length=20)
    customer: models.ForeignKey[Customer | None, Customer | None] = models.ForeignKey(
        Customer, null=True, blank=True, on_delete=models.CASCADE)
    pdf = models.FileField(upload_to="invoices/%Y", max_length=200)
    scan = models.FileField(upload_to="scans", blank=True, max_length=200)

    def __str__(self) -> str:
        return str(self.number)


class PlainInvoice(models.Model):
    """The same field on Django's own FileSystemStorage: what Django alone leaves behind
    (tests/dj/test_django_alone.py)."""

    number: models.CharField[str, str] = models.CharField(max_length=20)
    pdf = models.FileField(upload_to="plain", storage=FileSystemStorage(location=str(MEDIA)))


class Photo(models.Model):
    """An ImageField on the ledger, with the dimensions Django reads from the file."""

    image = models.ImageField(upload_to="photos", width_field="width", height_field="height")
    width: models.IntegerField[int, int] = models.IntegerField(null=True)
    height: models.IntegerField[int, int] = models.IntegerField(null=True)
