from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    operations = [
        migrations.CreateModel(
            name="Invoice",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True,
                                           serialize=False, verbose_name="ID")),
                ("number", models.CharField(max_length=20, unique=True)),
                ("pdf", models.FileField(max_length=200, upload_to="invoices/%Y")),
            ],
        ),
    ]
