"""Bearer tokens of the API. Only a digest of each token is kept: the token itself is shown once, when issued."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """A token acts as its user, with the user's role (cudaweb.accounts.roles), until it is revoked."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, help_text="what the token is for, e.g. ci or prometheus")
    digest = models.CharField(max_length=64, unique=True, help_text="sha256 of the token, hex")
    prefix = models.CharField(max_length=12, help_text="the token's first characters, to tell tokens apart")
    created = models.DateTimeField(default=timezone.now)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user", "-created"]

    def __str__(self):
        return "%s: %s (%s…)" % (self.user.get_username(), self.name or "unnamed", self.prefix)

    @property
    def is_active(self):
        return self.revoked is None
