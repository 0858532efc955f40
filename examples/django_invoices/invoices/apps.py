from django.apps import AppConfig


class InvoicesConfig(AppConfig):
    name = "examples.django_invoices.invoices"
    label = "invoices"
