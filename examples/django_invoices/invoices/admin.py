from django.contrib import admin

from examples.django_invoices.invoices.models import Invoice

admin.site.register(Invoice)
