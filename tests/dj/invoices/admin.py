from django.contrib import admin

from tests.dj.invoices.models import Invoice

admin.site.register(Invoice)
