"""The daemon's OpenTelemetry resource, whose `service.instance.id` a restore from a snapshot
renews.

Every VM restored from one snapshot holds the same memory, so the same instance id: the
collector could not tell their telemetry apart. The providers, the span encoder and the metrics
exporter all hold this one object and encode its attributes at each export, so what is exported
after `renew_instance_id` (exec_daemon/server.py's `Restored`) carries the new id.
"""

from __future__ import annotations

import uuid

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource

INSTANCE_ID = "service.instance.id"


class RenewableResource(Resource):
    @classmethod
    def of(cls, resource: Resource) -> RenewableResource:
        return cls(resource.attributes, resource.schema_url)

    @property
    def instance_id(self) -> str:
        return str(self.attributes.get(INSTANCE_ID, ""))

    def renew_instance_id(self) -> str:
        """A fresh `service.instance.id` (uuid4 reads the kernel's reseeded generator)."""
        renewed = str(uuid.uuid4())
        # One assignment: an export encoding the resource meanwhile sees the old or the new set.
        self._attributes = BoundedAttributes(
            attributes={**self._attributes, INSTANCE_ID: renewed}, immutable=True
        )
        return renewed
