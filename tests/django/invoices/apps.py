from django.apps import AppConfig


class InvoicesConfig(AppConfig):
    name = "tests.django.invoices"
    label = "invoices"
    default_auto_field = "django.db.models.BigAutoField"
