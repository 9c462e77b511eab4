"""Logins (successful or not) and changes to a user's role groups go to the audit log, wherever they happen
(the login page, the admin, `manage.py set_role`, a shell)."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.signals import m2m_changed, post_save, pre_save
from django.dispatch import receiver

from cudaweb.accounts.audit import record
from cudaweb.accounts.roles import ROLES


@receiver(user_logged_in, dispatch_uid="cudaweb-audit-login")
def _logged_in(sender, request, user, **kwargs):
    record("login.succeeded", request=request, actor=user, obj=user)


@receiver(user_login_failed, dispatch_uid="cudaweb-audit-login-failed")
def _login_failed(sender, credentials, request=None, **kwargs):
    # Django has already masked the password in `credentials`; keep only the name that was tried.
    record("login.failed", request=request, username=str(credentials.get("username", ""))[:150])


FLAGS = ("is_superuser", "is_staff", "is_active")  # a superuser is an admin: granting it is a role change


@receiver(pre_save, sender=get_user_model(), dispatch_uid="cudaweb-audit-user-flags-before")
def _flags_before(sender, instance, **kwargs):
    before = sender.objects.filter(pk=instance.pk).values(*FLAGS).first() if instance.pk else None
    instance._cudaweb_flags_before = before


@receiver(post_save, sender=get_user_model(), dispatch_uid="cudaweb-audit-user-flags")
def _flags_after(sender, instance, created, **kwargs):
    before = getattr(instance, "_cudaweb_flags_before", None)
    now = {flag: getattr(instance, flag) for flag in FLAGS}
    if before is None:  # a new user: recorded when made superuser or staff at once
        changed = {flag: True for flag in ("is_superuser", "is_staff") if now[flag]}
    else:
        changed = {flag: now[flag] for flag in FLAGS if before[flag] != now[flag]}
    if changed:
        record("user.flags_changed", obj=instance, created=before is None, **changed)


@receiver(m2m_changed, sender=get_user_model().groups.through, dispatch_uid="cudaweb-audit-roles")
def _groups_changed(sender, instance, action, reverse, pk_set, **kwargs):
    if action not in ("post_add", "post_remove", "pre_clear") or (action != "pre_clear" and not pk_set):
        return
    User = get_user_model()
    if action == "pre_clear":
        pairs = [(user, group) for user in ([instance] if not reverse else instance.user_set.all())
                 for group in (user.groups.all() if not reverse else [instance])]
    elif not reverse:  # user.groups.add(...)
        pairs = [(instance, group) for group in Group.objects.filter(pk__in=pk_set)]
    else:  # group.user_set.add(...)
        pairs = [(user, instance) for user in User.objects.filter(pk__in=pk_set)]
    verb = "added" if action == "post_add" else "removed"
    for user, group in pairs:
        if group.name in ROLES:
            record("role.changed", obj=user, **{verb: group.name})
