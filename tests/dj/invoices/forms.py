from django import forms

from tests.dj.invoices.models import Invoice


class InvoiceForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Invoice
        fields = ["number", "pdf"]
