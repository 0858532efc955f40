from django.contrib import admin

from tests.django.invoices.models import Invoice

admin.site.register(Invoice)
