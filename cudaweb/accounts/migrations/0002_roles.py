"""The three role groups (cudaweb.accounts.roles.ROLES). What each may do is the rule table of the pages
(cudaweb/fleet/access.py), not model permissions."""

from django.db import migrations

ROLES = ("viewer", "operator", "admin")  # as in roles.ROLES, written out: a migration does not import the app


def create_roles(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for name in ROLES:
        Group.objects.get_or_create(name=name)


def delete_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create_roles, delete_roles)]
