from __future__ import annotations

from django.db import models


class Invoice(models.Model):
    number: models.CharField[str, str] = models.CharField(max_length=20, unique=True)
    pdf = models.FileField(upload_to="invoices/%Y", max_length=200)

    def __str__(self) -> str:
        return str(self.number)
